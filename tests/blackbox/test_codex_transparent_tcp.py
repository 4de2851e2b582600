#!/usr/bin/env python3
"""Real codex 0.171.0 drives a turn through the server under test with a managed network
and transparent TCP on (issue 35), as test_codex_client.py drives 0.169.0: `codex
app-server` with a scripted model, its config a permission profile whose network has
`transparent_tcp = true` (and the `network_proxy` feature), so codex sends process/start
with a sandbox, enforceManagedNetwork and networkProxy.proxy.transparentTcp, and refuses
an exec-server that does not advertise networkProxyTransparentTcp.

The command of the turn ignores every proxy variable (`curl --noproxy '*'`): it reaches an
allowed name on this host, not a denied one, and sees the sandbox's resolver. It runs
against ours and against the 0.171.0 reference exec-server, side by side (the reference
with a bubblewrap on PATH, which test_transparent_tcp finds, and its CODEX_HOME out of the
temporary directory: codex_ref.server_env). Codex 0.171.0 comes from codex_ref (its ctest
fixture installs it); skipped without it, without /dev/net/tun, or (for the names) without
/etc/hosts aliases for the reference."""
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa
import test_codex_client as cc  # noqa: E402  (its scripted model, app-server and proxy)
import test_transparent_tcp as tt  # noqa: E402  (its host server, 0.171.0 finder, aliases)

CODEX = tt.find_reference_171()
Recorder, aliases = tt.Recorder, tt.aliases


CONFIG = """model = "mock-model"
model_provider = "mock"
approval_policy = "never"
default_permissions = "managed-net"
suppress_unstable_features_warning = true

[permissions.managed-net]
extends = ":workspace"

[permissions.managed-net.network]
enabled = true
enable_socks5 = true
transparent_tcp = true
mode = "full"
allow_local_binding = true

[permissions.managed-net.network.domains]
"%(allowed)s" = "allow"
"%(denied)s" = "deny"

[features]
network_proxy = true

[model_providers.mock]
name = "mock"
base_url = "http://127.0.0.1:%(port)d/v1"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
"""


def run_turn(label, server_cmd, is_ref, allowed, denied, http_port):
    """One turn of codex against a server: returns (commandExecution item, process/start
    params codex sent, notes)."""
    srv = Server(cmd=server_cmd + ["--listen", "ws://127.0.0.1:0"], reference=is_ref)
    home = tempfile.mkdtemp(prefix="execbb-codex-tt-home-")
    work = tempfile.mkdtemp(prefix="execbb-codex-tt-work-")
    proxy = cc.Proxy(srv.host, srv.port)
    tag = "%s-%d" % (label, time.monotonic_ns())
    script = ("cat /etc/resolv.conf; "
              "curl -sS -m 10 --noproxy '*' http://%s.:%d/codex-ok-%s; echo; "
              "curl -sS -m 10 --noproxy '*' http://%s.:%d/codex-denied-%s; echo \" rc=$?\""
              % (allowed, http_port, tag, denied, http_port, tag))
    model = cc.ScriptedModel([lambda o: [cc.function_call("net", "exec_command", {
        "cmd": script, "workdir": work, "yield_time_ms": 20000})]])
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(CONFIG % {"allowed": allowed, "denied": denied, "port": model.port})
    app = cc.AppServer(CODEX, home, work)
    try:
        app.call("initialize", {"clientInfo": {"name": "execbb", "version": "0.1"},
                                "capabilities": {"experimentalApi": True}})
        app.send({"method": "initialized"})
        app.call("environment/add", {"environmentId": "under-test",
                                     "execServerUrl": "ws://127.0.0.1:%d" % proxy.port})
        thread = app.call("thread/start", {
            "cwd": work, "environments": [{"environmentId": "under-test", "cwd": work}]})
        app.call("turn/start", {"threadId": thread["thread"]["id"],
                                "input": [{"type": "text", "text": "fetch it"}]})
        done = app.wait_method("turn/completed", DEFAULT_TIMEOUT * 9)
        assert not model.errors, model.errors
        assert done["params"]["turn"]["status"] == "completed", (label, done)
        items = [n["params"]["item"] for n in app.notes if n.get("method") == "item/completed"
                 and n["params"]["item"].get("type") == "commandExecution"]
        assert items, (label, "no command ran", app.notes[-5:])
        return items[0], proxy.methods, app.notes, tag
    finally:
        app.close()
        model.close()
        proxy.close()
        if is_ref:
            srv.kill()
        else:
            srv.stop()
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


@needs_own_server
def test_codex_171_turn_with_transparent_tcp(_):
    if not CODEX:
        raise TestSkip("codex 0.171.0 is not installed (~/.cache/codex-ref-0.171)")
    if not os.path.exists("/dev/net/tun"):
        raise TestSkip("no /dev/net/tun on this host")
    port = tt.PORT  # its recording web server, on every address of this host
    al = aliases()
    # the reference's sandbox launcher wants bubblewrap on PATH (the child's, which codex's
    # envPolicy takes from the server's): test_transparent_tcp put the bundled one there
    runs = []
    # names for 127.0.0.1 on the host: /etc/hosts aliases (both servers resolve them),
    # else, ours alone, test_transparent_tcp's EXEC_SERVER_TEST_RESOLVE names
    names = al[:2] if len(al) >= 2 else ["tt-a.test", "tt-b.test"]
    runs.append(("ours", WRAPPER + [SERVER_PATH], False))
    if len(al) >= 2 and shutil.which("bwrap"):
        runs.append(("0.171.0", [CODEX, "exec-server"], True))
    else:
        print("  the reference's run skipped (no /etc/hosts aliases or no bubblewrap)")
    print("  against: " + ", ".join(r[0] for r in runs))
    for label, cmd, is_ref in runs:
        item, methods, notes, tag = run_turn(label, cmd, is_ref, names[0], names[1], port)
        out = item.get("aggregatedOutput") or ""
        ctx = (label, out)
        assert "process/start" in methods, (label, methods)
        assert "nameserver 127.0.0.53" in out, ctx
        assert "hello from /codex-ok-" + tag in out, ctx
        assert "/codex-ok-" + tag in Recorder.got, ctx
        assert "/codex-denied-" + tag not in Recorder.got, ctx
        assert "hello from /codex-denied" not in out and " rc=0" not in out, ctx
        for n in notes:
            if n.get("method") in ("warning", "error", "configWarning"):
                text = json.dumps(n).lower()
                assert "transparent" not in text and "executor" not in text, (label, n)


if __name__ == "__main__":
    run_tests(globals(), per_test_timeout=int(300 * TIMEOUT_SCALE))
