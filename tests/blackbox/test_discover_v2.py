#!/usr/bin/env python3
"""capabilities/discoverV2 (capability capabilityDiscoveryV2, PROTOCOL.md §8.3): the
skills and plugins installed on the executor, from the server's own CODEX_HOME, HOME and
/etc/codex. Each test builds its trees in a temporary HOME and CODEX_HOME and starts a
server with them. The checks below were settled against codex 0.169.0 and run against
either server; besides, when the reference is installed, `test_same_answers_as_reference`
starts both on the same trees and compares every answer whole.

The reference notices changes only after several seconds: deadlines for a change to
show are generous (and scaled)."""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa

SLOW = DEFAULT_TIMEOUT * 6
W_META = "some capability metadata could not be loaded; discovery may be incomplete"
W_LOC = "some capability locations could not be resolved; discovery may be incomplete"


def skill_md(name=None, description="d", extra=""):
    head = "---\n"
    if name is not None:
        head += "name: %s\n" % name
    if description is not None:
        head += "description: %s\n" % description
    return head + extra + "---\nbody that is never returned\n"


class Trees:
    """A HOME (with .agents/skills) and a CODEX_HOME (skills, plugins/cache)."""

    def __init__(self, codex_home_exists=True):
        self.home = tempfile.mkdtemp(prefix="discv2-", dir="/var/tmp")
        self.ch = os.path.join(self.home, "codexhome")
        if codex_home_exists:
            os.makedirs(self.ch)

    def write(self, rel, text, base=None):
        p = os.path.join(base or self.ch, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
        return p

    def plugin(self, marketplace, name, version, manifest=None, skills=("s",)):
        root = "plugins/cache/%s/%s/%s" % (marketplace, name, version)
        if manifest is not False:
            m = {"name": name, "version": version} if manifest is None else manifest
            self.write(root + "/.codex-plugin/plugin.json",
                       m if isinstance(m, str) else json.dumps(m))
        for s in skills:
            self.write(root + "/skills/%s/SKILL.md" % s, skill_md(s, "%s of %s" % (s, version)))
        return os.path.join(self.ch, root)

    def env(self):
        return {"HOME": self.home, "CODEX_HOME": self.ch}

    def server(self, reference=None):
        kw = {} if reference is None else {"reference": reference}
        return server_with_env(self.env(), **kw)

    def uri(self, p):
        return "file://" + p

    def cleanup(self):
        shutil.rmtree(self.home, ignore_errors=True)


def discover(s, params=None):
    return s.call("capabilities/discoverV2", params or {"cwd": "file:///tmp"}, timeout=SLOW)


def local_skills(r):
    """Skills not from /etc/codex (the host's own, if it has any)."""
    return [k for k in r["skills"] if k.get("discoveryRoot", {}).get("id") != "system-skills"]


def rich(t):
    """The trees every comparison runs on: each rule the reference applies once."""
    t.write("skills/alpha/SKILL.md", skill_md("alpha-skill", "Does alpha",
                                              "metadata:\n  short-description: '  short  alpha '\n"))
    t.write("skills/alpha/agents/openai.yaml",
            "interface:\n  display_name: Alpha\npolicy:\n  allow_implicit_invocation: false\n"
            "  products: [codex, CHATGPT]\ndependencies:\n  tools:\n    - type: mcp\n"
            "      value: foo\n      description: d\n      transport: streamable_http\n"
            "      url: http://x\n    - value: no-type\n    - type: env_var\n      value: FOO\n")
    t.write("skills/nested/deep/beta/SKILL.md", skill_md(None, "beta desc"))
    t.write("skills/no-front-matter/SKILL.md", "just text\n")
    t.write("skills/too-long/SKILL.md", skill_md("n" * 65))
    t.write("skills/no-desc/SKILL.md", skill_md("c", None))
    t.write("skills/colon/SKILL.md", skill_md("colon", "Build for AWS: ECS"))
    t.write("skills/spaces  x/SKILL.md",
            '---\nname: "  a   b "\ndescription: "  multi\n  line  "\n---\n')
    t.write("skills/.system/sys/SKILL.md", skill_md("sys", "system"))
    t.write("skills/number/SKILL.md", skill_md("number", "5"))
    t.write("skills/badyaml/SKILL.md", skill_md("badyaml"))
    t.write("skills/badyaml/agents/openai.yaml", "policy: [\n")
    t.write("skills/badpolicy/SKILL.md", skill_md("badpolicy"))
    t.write("skills/badpolicy/agents/openai.yaml",
            "dependencies:\n  tools:\n    - type: mcp\n      value: v\npolicy:\n  products: [x]\n")
    t.write("skills/nest/.codex-plugin/plugin.json", json.dumps({"name": "nestp"}))
    t.write("skills/nest/s1/SKILL.md", skill_md("s1"))
    t.write("real-k/SKILL.md", skill_md("k", "symlinked"), base=t.home)
    os.makedirs(os.path.join(t.home, ".agents/skills"))
    os.symlink(os.path.join(t.home, "real-k"), os.path.join(t.home, ".agents/skills/k"))
    t.write(".agents/skills/gamma/SKILL.md", skill_md("gamma", "g"), base=t.home)
    t.plugin("mkt", "multi", "1.2.0")
    t.plugin("mkt", "multi", "1.10.0")
    t.plugin("mkt", "multi", "1.10.0-beta")
    t.plugin("mkt", "loc", "9.0.0")
    t.plugin("mkt", "loc", "local")
    t.plugin("mkt", "nomanifest", "1.0.0", manifest=False)
    t.plugin("bad.mkt", "p", "1.0.0")
    t.plugin("mkt", "badver", "a b")
    t.plugin("mkt", "badjson", "1.0.0", manifest="{not json")
    t.plugin("mkt", "renamed", "1.0.0",
             manifest={"name": "othername", "interface": {"displayName": "Nice Name"}})
    t.plugin("mkt", "noname", "2.0.0", manifest={"name": "", "mcpServers": "./mcp.json"})
    t.write("plugins/cache/mkt/noname/2.0.0/mcp.json", '{"mcpServers": {}}')
    root = t.plugin("mkt", "remote", "1.0.0")
    t.write(os.path.join(os.path.dirname(root), ".codex-remote-plugin-install.json"),
            json.dumps({"schema_version": 1, "remote_plugin_id": " rid-1 "}))
    root = t.plugin("mkt", "remotebad", "1.0.0")
    t.write(os.path.join(os.path.dirname(root), ".codex-remote-plugin-install.json"), "{}")


@needs_own_server
def test_advertised(_):
    t = Trees()
    try:
        with t.server() as srv:
            caps = srv.session().call("environment/info")["capabilities"]
            assert caps["capabilityDiscoveryV2"] is True, caps
    finally:
        t.cleanup()


@needs_own_server
def test_inventory(_):
    t = Trees()
    try:
        rich(t)
        with t.server() as srv:
            r = discover(srv.session())
        skills = {k["name"]: k for k in local_skills(r)}
        # By path within a root, roots in order (CODEX_HOME's, then ~/.agents').
        assert list(skills) == ["sys", "alpha-skill", "badpolicy", "badyaml", "colon",
                                "nestp:s1", "beta", "number", "a b", "gamma", "k"], list(skills)
        a = skills["alpha-skill"]
        assert a["shortDescription"] == "short alpha" and a["description"] == "Does alpha", a
        assert a["path"] == t.uri(t.ch + "/skills/alpha/SKILL.md"), a
        assert a["discoveryRoot"] == {"id": "codex-home-skills", "path": t.uri(t.ch + "/skills")}
        assert a["policy"] == {"allowImplicitInvocation": False, "products": ["codex", "chatgpt"]}
        assert [x["value"] for x in a["dependencies"]["tools"]] == ["foo", "FOO"], a
        assert a["dependencies"]["tools"][0] == {
            "type": "mcp", "value": "foo", "description": "d", "transport": "streamable_http",
            "command": None, "url": "http://x", "oauthCallbackPort": None}
        assert skills["badpolicy"]["policy"] is None and skills["badpolicy"]["dependencies"] is None
        assert skills["colon"]["description"] == "Build for AWS: ECS"
        assert skills["a b"]["description"] == "multi line"
        assert skills["number"]["description"] == "5"
        assert skills["gamma"]["discoveryRoot"]["id"] == "user-agent-skills"
        assert skills["k"]["path"] == t.uri(t.home + "/.agents/skills/k/SKILL.md")

        plugins = {p["id"]: p for p in r["plugins"]}
        assert list(plugins) == ["loc@mkt", "multi@mkt", "noname@mkt", "remote@mkt",
                                 "remotebad@mkt", "renamed@mkt"], list(plugins)
        assert plugins["loc@mkt"]["version"] == "local"
        assert plugins["multi@mkt"]["version"] == "1.10.0"
        m = plugins["multi@mkt"]
        assert m["root"] == t.uri(t.ch + "/plugins/cache/mkt/multi/1.10.0"), m
        assert m["skills"][0]["name"] == "multi:s" and "discoveryRoot" not in m["skills"][0], m
        assert m["files"]["manifest"]["path"].endswith("/.codex-plugin/plugin.json"), m
        assert plugins["remote@mkt"]["remotePluginId"] == "rid-1"
        assert plugins["remotebad@mkt"]["remotePluginId"] is None
        assert plugins["renamed@mkt"]["displayName"] == "Nice Name"
        assert plugins["renamed@mkt"]["skills"][0]["name"] == "othername:s"
        n = plugins["noname@mkt"]
        assert n["displayName"] == "2.0.0" and n["skills"][0]["name"] == "2.0.0:s", n
        assert n["files"]["mcpConfig"]["contents"] == '{"mcpServers": {}}', n
        # One warning for the unreadable remote metadata; one per location whose
        # metadata did not all load (the skills root; two plugins).
        assert r["warnings"] == [W_LOC, W_META, W_META, W_META], r["warnings"]
    finally:
        t.cleanup()


@needs_own_server
def test_same_answers_as_reference(_):
    """Both servers on the same trees, every answer compared whole."""
    if IS_REF or find_reference() is None:
        raise TestSkip("needs ours and the reference")
    t = Trees()
    try:
        rich(t)
        answers = []
        for reference in (False, True):
            with t.server(reference=reference) as srv:
                s = srv.session()
                got = [discover(s)]
                sb = {"permissions": {"type": "managed", "file_system": {
                    "type": "restricted", "entries": [
                        {"path": {"type": "path", "path": t.uri(t.home + "/.agents")},
                         "access": "read"}]}, "network": "restricted"},
                    "windowsSandboxLevel": "disabled", "cwd": "file:///tmp"}
                got.append(discover(s, {"cwd": "file:///tmp", "sandbox": sb}))
                answers.append(got)
        assert answers[0] == answers[1], "ours:\n%s\nreference:\n%s" % (
            json.dumps(answers[0], indent=1), json.dumps(answers[1], indent=1))
    finally:
        t.cleanup()


@needs_own_server
def test_changes_are_seen(_):
    """Scanned once, then watched: what is added, changed or removed shows up."""
    t = Trees()
    try:
        with t.server() as srv:
            s = srv.session()
            assert local_skills(discover(s)) == [] and discover(s)["plugins"] == []

            def state():
                r = discover(s)
                return ([k["name"] for k in local_skills(r)],
                        [(p["id"], p["version"]) for p in r["plugins"]])
            # Added: a skill, a root that did not exist (~/.agents/skills), a plugin.
            t.write("skills/a/SKILL.md", skill_md("a"))
            t.write(".agents/skills/b/SKILL.md", skill_md("b"), base=t.home)
            t.plugin("m", "p", "1.0.0")
            wait_until(lambda: state() == (["a", "b"], [("p@m", "1.0.0")]), SLOW * 2,
                       "the additions")
            # Changed, removed, upgraded.
            t.write("skills/a/SKILL.md", skill_md("a2"))
            shutil.rmtree(os.path.join(t.home, ".agents/skills/b"))
            t.plugin("m", "p", "1.1.0")
            wait_until(lambda: state() == (["a2"], [("p@m", "1.1.0")]), SLOW * 2,
                       "the changes")
    finally:
        t.cleanup()


@needs_own_server
def test_errors(_):
    t = Trees()
    try:
        with t.server() as srv:
            s = srv.session()
            assert s.error("capabilities/discoverV2", None) == (
                -32602, "invalid type: null, expected struct DiscoverV2CapabilitiesRequest")
            assert s.error("capabilities/discoverV2", {}) == (-32602, "missing field `cwd`")
            assert s.error("capabilities/discoverV2", {"cwd": "relative"}) == (
                -32602, "invalid URI: relative URL without a base")
            assert s.error("capabilities/discoverV2", {"cwd": "file:///tmp", "sandbox": {}}) == (
                -32602, "missing field `permissions`")
            sb = {"permissions": {"type": "managed", "file_system": {
                "type": "restricted", "entries": []}, "network": "restricted"},
                "windowsSandboxLevel": "disabled"}
            assert s.error("capabilities/discoverV2", {"cwd": "file:///tmp", "sandbox": sb}) == (
                -32602, "missing field `cwd`")
            # The cwd adds nothing and need not exist; unknown members are ignored.
            assert discover(s, {"cwd": "file:///nonexistent", "extra": 1})["skills"] is not None
    finally:
        t.cleanup()


@needs_own_server
def test_missing_codex_home(_):
    t = Trees(codex_home_exists=False)
    try:
        with t.server() as srv:
            assert srv.session().error("capabilities/discoverV2", {"cwd": "file:///tmp"}) == (
                -32603, 'CODEX_HOME points to "%s", but that path does not exist' % t.ch)
        # A file is no Codex home either (the same check as environmentConfig/read's).
        with open(t.ch, "w"):
            pass
        with t.server() as srv:
            assert srv.session().error("capabilities/discoverV2", {"cwd": "file:///tmp"}) == (
                -32603, 'CODEX_HOME points to "%s", but that path is not a directory' % t.ch)
    finally:
        if os.path.isfile(t.ch):
            os.unlink(t.ch)
        t.cleanup()


@needs_own_server
def test_default_codex_home(_):
    """Without CODEX_HOME: ~/.codex."""
    t = Trees(codex_home_exists=False)
    try:
        t.write(".codex/skills/x/SKILL.md", skill_md("x"), base=t.home)
        env = {"HOME": t.home}
        old = os.environ.pop("CODEX_HOME", None)
        try:
            with server_with_env(env) as srv:
                names = [k["name"] for k in local_skills(discover(srv.session()))]
        finally:
            if old is not None:
                os.environ["CODEX_HOME"] = old
        assert names == ["x"], names
    finally:
        t.cleanup()


@needs_own_server
def test_sandbox_limits_what_is_read(_):
    t = Trees()
    try:
        t.write("skills/a/SKILL.md", skill_md("a"))
        t.write(".agents/skills/b/SKILL.md", skill_md("b"), base=t.home)
        t.plugin("m", "p", "1.0.0")

        def sb(*paths):
            return {"permissions": {"type": "managed", "file_system": {
                "type": "restricted", "entries": [
                    {"path": {"type": "path", "path": t.uri(p)}, "access": a}
                    for p, a in paths]}, "network": "restricted"},
                "windowsSandboxLevel": "disabled", "cwd": "file:///tmp"}
        with t.server() as srv:
            s = srv.session()
            cases = [((("/tmp", "read"),), [], []),
                     (((t.home + "/.agents", "read"),), ["b"], []),
                     (((t.home, "read"),), ["a", "b"], ["p@m"])]
            for paths, skills, plugins in cases:
                r = discover(s, {"cwd": "file:///tmp", "sandbox": sb(*paths)})
                assert [k["name"] for k in local_skills(r)] == skills, (paths, r)
                assert [p["id"] for p in r["plugins"]] == plugins, (paths, r)
                assert r["warnings"] == [], r
    finally:
        t.cleanup()


if __name__ == "__main__":
    run_tests(globals(), per_test_timeout=300)
