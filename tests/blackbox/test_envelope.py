#!/usr/bin/env python3
"""Message envelope (§2), lifecycle gating (§3), environment/* (§8.1)."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa

PREFIX = "failed to parse websocket JSON-RPC message from exec-server websocket 127.0.0.1:"


def expect_malformed(s, text, detail=None):
    msg, raw = s.raw_roundtrip(text)
    assert msg.get("id") == -1, (text, raw)
    assert msg["error"]["code"] == -32600, (text, raw)
    m = msg["error"]["message"]
    assert m.startswith(PREFIX), (text, m)
    rest = m[len(PREFIX):]
    port, _, det = rest.partition(": ")
    assert port.isdigit(), (text, m)
    assert int(port) == s.t.ws.peer[1], "peer port %s != our port %s" % (port, s.t.ws.peer[1])
    assert det, m
    if detail is not None and not IS_REF:
        pass  # detail text is informative only (§2.3)
    if detail is not None and IS_REF:
        assert detail in det, (text, det)
    assert set(msg) == {"id", "error"} and set(msg["error"]) == {"code", "message"}, raw
    return det


def test_malformed_messages(srv):
    s = srv.session(init=False)
    cases = [
        ("not-json", "expected ident at line 1 column 2"),
        ('[{"id":1,"method":"initialize","params":{"clientName":"x"}}]',
         "expected a JSON-RPC object"),
        ("{}", "missing field `error`"),
        ('{"id":1,"method":5}', "invalid type: number, expected a string"),
        ('{"id":1,"method":"environment/status"}xx', "trailing characters"),
        ('{"id":1,"method":"environment/status"}{"id":2,"method":"environment/status"}', None),
        ('{"id":1,"id":2,"method":"environment/status"}', "duplicate JSON object key `id`"),
        ('{"id":1,"method":"initialize","params":{"clientName":"a","clientName":"b"}}',
         "duplicate"),
        ("", "EOF while parsing a value"),
        ("42", None),
        ('"str"', None),
        ("null", None),
        ('{"id":null,"method":"environment/status"}', None),
        ('{"id":1.0,"method":"environment/status"}', None),
        ('{"id":18446744073709551615,"method":"environment/status"}', None),
        ('{"id":true,"method":"environment/status"}', None),
        ('{"id":1,"method":"initialize","params":{"clientName":"x"},"trace":5}',
         "W3cTraceContext"),
        ('{"id":1,"method":"initialize","params":{"clientName":"x"},'
         '"trace":{"traceparent":1}}', None),
    ]
    for text, detail in cases:
        expect_malformed(s, text, detail)
    # the connection stays open, and nothing was initialized by the malformed ones
    assert s.call("initialize", {"clientName": "after"})["sessionId"]
    s.close()


def test_malformed_after_initialize_keeps_connection(srv):
    s = srv.session()
    expect_malformed(s, "{not json")
    assert s.call("environment/status") == {"status": "ready"}
    s.close()


def test_jsonrpc_member_and_trace_ignored(srv):
    s = srv.session(init=False)
    msg, raw = s.raw_roundtrip('{"jsonrpc":"2.0","id":"t","method":"initialize","params":'
                               '{"clientName":"x","extra":1},"trace":{"traceparent":'
                               '"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",'
                               '"tracestate":"a=b"},"unknown":[1,2]}')
    assert msg["id"] == "t" and "sessionId" in msg["result"], raw
    assert "jsonrpc" not in msg
    s.close()


def test_ids_echoed_exactly(srv):
    s = srv.session()
    for id_text in ('"s-1"', '""', "0", "-5", "9223372036854775807", "-9223372036854775808",
                    '"\\u00e9\\n"'):
        msg, raw = s.raw_roundtrip('{"id":%s,"method":"environment/status"}' % id_text)
        assert raw == '{"id":%s,"result":{"status":"ready"}}' % id_text or \
            (msg["id"] == json.loads(id_text) and msg["result"] == {"status": "ready"}), raw
        if id_text[0] != '"':
            assert raw.startswith('{"id":%s,' % id_text), (id_text, raw)
    # an error reply echoes the id too
    msg, raw = s.raw_roundtrip('{"id":9223372036854775807,"method":"no/such"}')
    assert '"id":9223372036854775807' in raw and msg["error"]["code"] == -32601, raw
    msg, raw = s.raw_roundtrip('{"id":"abc","method":"no/such"}')
    assert msg["id"] == "abc", raw
    s.close()


def test_gating_before_initialize(srv):
    s = srv.session(init=False)
    fam = {"process/start": "exec", "process/read": "exec", "process/write": "exec",
           "process/signal": "exec", "process/terminate": "exec",
           "fs/readFile": "filesystem", "fs/getMetadata": "filesystem",
           "environment/status": "environment status", "environment/info": "environment info"}
    params = {"process/start": {"processId": "p", "argv": ["true"], "cwd": "file:///tmp",
                                "env": {}, "tty": False},
              "process/read": {"processId": "p"},
              "process/write": {"processId": "p", "chunk": "", "writeId": "1"},
              "process/signal": {"processId": "p", "signal": "interrupt"},
              "process/terminate": {"processId": "p"},
              "fs/readFile": {"path": "file:///tmp/x"},
              "fs/getMetadata": {"path": "file:///tmp"},
              "environment/status": None, "environment/info": None}
    for m, f in fam.items():
        code, text = s.error(m, params[m])
        assert (code, text) == (-32600, "client must call initialize before using %s methods"
                                % f), (m, code, text)
    code, text = s.error("no/such", {})
    assert (code, text) == (-32601, "exec-server stub does not implement `no/such` yet")
    # params are decoded before the gate
    code, text = s.error("process/start", {})
    assert (code, text) == (-32602, "missing field `processId`"), (code, text)
    r = s.call("initialize", {"clientName": "c"})
    # before initialized
    for m, f in fam.items():
        code, text = s.error(m, params[m])
        assert (code, text) == (-32600, "client must send initialized before using %s methods"
                                % f), (m, code, text)
    s.notify("initialized", {})
    assert s.call("environment/status") == {"status": "ready"}
    # second initialize
    code, text = s.error("initialize", {"clientName": "c"})
    assert (code, text) == (-32600, "initialize may only be sent once per connection")
    # initialized may be repeated harmlessly, with any params
    s.notify("initialized", [1, 2])
    s.notify("initialized", omit_params=True)
    assert s.call("environment/status") == {"status": "ready"}
    # a request named initialized
    code, text = s.error("initialized", {})
    assert (code, text) == (-32601, "exec-server stub does not implement `initialized` yet")
    assert r["sessionId"]
    s.close()


def test_pipelined_handshake(srv):
    """§3.4 rule 1: initialize, initialized, request back to back work."""
    s = srv.session(init=False)
    i1 = s.send_request("initialize", {"clientName": "pipelined"})
    s.notify("initialized", {})
    i2 = s.send_request("environment/status", None)
    assert "sessionId" in s.wait_response(i1)["result"]
    assert s.wait_response(i2)["result"] == {"status": "ready"}
    # and a request pipelined before initialized is rejected deterministically
    t = srv.session(init=False)
    i1 = t.send_request("initialize", {"clientName": "pipelined"})
    i2 = t.send_request("environment/status", None)
    t.notify("initialized", {})
    assert "result" in t.wait_response(i1)
    e = t.wait_response(i2)["error"]
    assert e == {"code": -32600,
                 "message": "client must send initialized before using environment status "
                            "methods"}, e
    s.close()
    t.close()


def test_initialize_errors(srv):
    s = srv.session(init=False)
    code, text = s.error("initialize", {})
    assert (code, text) == (-32602, "missing field `clientName`"), text
    code, text = s.error("initialize", None, omit_params=True)
    assert code == -32602 and "invalid type: null" in text, text
    code, text = s.error("initialize", {"clientName": 5})
    assert code == -32602, text
    # resumeSessionId null creates a new session
    r = s.call("initialize", {"clientName": "x", "resumeSessionId": None})
    sid = r["sessionId"]
    import re
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
                        sid), sid
    s.close()


def test_unknown_method(srv):
    s = srv.session()
    # process/resize and process/closeStdin are ours (§11 (g)), process/list too (§11 (i));
    # the reference lacks them
    extra = ("process/resize", "process/closeStdin", "process/list") if IS_REF else ()
    for m in ("no/such", "shutdown", "ping", "") + extra:
        code, text = s.error(m, {})
        assert (code, text) == (-32601, "exec-server stub does not implement `%s` yet" % m), text
    s.close()


# ---- NUL bytes (issue 39 item 3) ----------------------------------------------------

def nul_start(cwd, argv=("echo", "a\u0000b"), env=None, process_id="nul-1"):
    return {"processId": process_id, "argv": list(argv), "cwd": "file://" + cwd,
            "env": env or {"PATH": "/usr/bin:/bin"}, "tty": False}


def test_nul_in_a_string_keeps_the_request_id(srv):
    """A `\u0000` in argv: the reference answers the request itself, -32603 with
    Rust's words for it; ours did with id -1 (a parse error), so the caller waited
    for its own id until it timed out."""
    s = srv.session()
    for id in (7, "str-id", "a\u0000b"):
        m, raw = s.raw_roundtrip(json.dumps({"id": id, "method": "process/start",
                                             "params": nul_start(srv.workdir)}))
        assert m.get("id") == id, raw
        assert m["error"]["code"] == -32603, raw
        assert m["error"]["message"] == "nul byte found in provided data", raw
    # The connection goes on; the same id without the NUL starts the process.
    r = s.call("process/start", nul_start(srv.workdir, argv=("echo", "ab")))
    assert r["processId"] == "nul-1", r
    assert s.collect_until_closed("nul-1")["stdout"] == b"ab\n"
    s.close()


def test_nul_in_the_method_name_is_an_unknown_method(srv):
    s = srv.session()
    for name in ("process/st\u0000art", "process/start\u0000", "\u0000"):
        m, raw = s.raw_roundtrip(json.dumps({"id": 9, "method": name, "params": {}}))
        assert m == {"error": {"code": -32601, "message":
                               "exec-server stub does not implement `%s` yet" % name},
                     "id": 9}, raw
    assert s.call("environment/status") == {"status": "ready"}
    s.close()


@ours_only
def test_nul_anywhere_in_params_is_refused_with_the_id(srv):
    """Ours refuses a NUL wherever it is in params or trace, keys included (PROTOCOL.md
    §2.3): past the decoder strings are C strings, where "a\0b" would become "a"."""
    s = srv.session()
    path = os.path.join(srv.workdir, "nul.txt")
    open(path, "w").write("x")
    cases = [
        ("process/start", nul_start(srv.workdir, argv=("echo", "ab"), env={"A": "x\u0000"})),
        ("process/start", nul_start(srv.workdir, argv=("echo", "ab"),
                                    process_id="p\u0000")),
        ("fs/readFile", {"path": "file://" + path + "\u0000x"}),
        ("fs/writeFile", {"path": "file://" + path, "dataBase64": "eA==", "z": ["\u0000"]}),
    ]
    for i, (method, params) in enumerate(cases):
        m, raw = s.raw_roundtrip(json.dumps({"id": i, "method": method, "params": params}))
        assert m == {"error": {"code": -32603, "message": "nul byte found in provided data"},
                     "id": i}, (method, raw)
    m, raw = s.raw_roundtrip(json.dumps({"id": 50, "method": "environment/status",
                                         "trace": {"traceparent": "00-\u0000"}}))
    assert m == {"error": {"code": -32603, "message": "nul byte found in provided data"},
                 "id": 50}, raw
    # A key holding NUL: jansson cannot keep it, the answer still has the id.
    text = '{"id":77,"method":"fs/readFile","params":{"path":"file://%s","k\\u0000":1}}' % path
    m, raw = s.raw_roundtrip(text)
    assert m == {"error": {"code": -32603, "message": "nul byte found in provided data"},
                 "id": 77}, raw
    # An escaped backslash before u0000 is no NUL.
    text = '{"id":78,"method":"fs/readFile","params":{"path":"file://%s","k\\\\u0000":1}}' % path
    m, raw = s.raw_roundtrip(text)
    assert m == {"id": 78, "result": {"dataBase64": "eA=="}}, raw
    assert open(path).read() == "x", "the refused write wrote"
    s.close()


# ---- the reference's limit of values per message ---------------------------------------

VALUES_PREFIX = '{"id":7,"method":"environment/status","params":null,"pad":['


def values_message(n, sep=","):
    # 5 values before the array's elements: the object, 7, the method, null, the array
    return VALUES_PREFIX + sep.join(["0"] * n) + "]}"


def test_json_value_limit(srv):
    """262,144 values pass, one more is refused before parsing, where serde stops."""
    s = srv.session()
    m = s.raw_roundtrip(values_message(262144 - 5))[0]
    assert m == {"id": 7, "result": {"status": "ready"}}, m
    det = expect_malformed(s, values_message(262144 - 4))
    # the column of the comma before the value too many
    assert det == "JSON-RPC message exceeds the limit of 262144 JSON values at line 1 " \
        "column %d" % (len(VALUES_PREFIX) + 2 * (262144 - 5)), det
    det = expect_malformed(s, values_message(300000, sep=",\n"))
    assert det == "JSON-RPC message exceeds the limit of 262144 JSON values at line " \
        "%d column 0" % (262144 - 4), det
    # keys are not values: 200,000 members of one object is 200,005 values
    text = VALUES_PREFIX[:-1] + "{" + ",".join('"k%d":0' % i for i in range(200000)) + "}}"
    assert s.raw_roundtrip(text)[0] == {"id": 7, "result": {"status": "ready"}}
    assert s.call("environment/status") == {"status": "ready"}
    s.close()


@ours_only
def test_unknown_notification_ours(srv):
    for init in (False, True):
        s = srv.session(init=init)
        s.notify("foo/bar", {})
        m = s.wait_other(lambda m: m.get("id") == -1)
        assert m == {"error": {"code": -32600, "message": "unexpected notification `foo/bar`"},
                     "id": -1}, m
        s.notify("initialize", {"clientName": "x"})
        m = s.wait_other(lambda m: m.get("id") == -1)
        assert m["error"]["code"] == -32600, m
        # connection stays open
        if not init:
            s.initialize()
        assert s.call("environment/status") == {"status": "ready"}
        s.close()


def test_unknown_notification_reference(srv):
    if not IS_REF:
        raise TestSkip("reference-only behaviour")
    s = srv.session()
    s.notify("foo/bar", {})
    assert s.wait_closed(5), "reference should close the connection"


def test_initialized_before_initialize_closes(srv):
    s = srv.session(init=False)
    s.notify("initialized", {})
    assert s.wait_closed(5), "initialized before initialize must close the connection"


def test_client_response_closes(srv):
    for text in ('{"id":99,"result":{}}', '{"id":-1,"error":{"code":1,"message":"x"}}'):
        s = srv.session()
        s.send_raw(text)
        assert s.wait_closed(5), "client-sent response %s must close the connection" % text


def test_environment_status_and_info(srv):
    s = srv.session(init=False)
    r = s.call("initialize", {"clientName": "env"})
    s.notify("initialized")
    for params, omit in ((None, True), (None, False), ({}, False)):
        assert s.call("environment/status", params, omit_params=omit) == {"status": "ready"}
    info = s.call("environment/info")
    for k in ("shell", "executorVersion", "capabilities"):
        assert k in info, (k, info)
    assert isinstance(info["capabilities"], dict)
    assert isinstance(info["shell"], dict) and "name" in info["shell"], info
    if "cwd" in info:
        assert info["cwd"] == "file://" + srv.workdir, info["cwd"]
    if "platformOs" in info:
        assert info["platformOs"] == "linux"
    if "environmentInfo" in r:
        assert set(r["environmentInfo"]) == set(info), (r["environmentInfo"], info)
    code, text = s.error("environment/status", {"a": 1})
    assert (code, text) == (-32602, "invalid type: map, expected unit"), text
    code, text = s.error("environment/info", [1])
    assert code == -32602, text
    if not IS_REF:
        for k, v in info["capabilities"].items():
            assert isinstance(v, bool), (k, v)
    s.close()


@needs_own_server
def test_environment_directories(_):
    """userHomeDir, tempDir and temporaryDirectories as the reference derives them:
    $HOME, else (unset) the password entry's home; $TMPDIR made absolute against the
    server's cwd and normalised, and listed in temporaryDirectories when set (codex
    makes those writable in a workspace-write sandbox); paths normalised lexically."""
    import pwd
    try:
        pw_home = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        pw_home = None
    cases = [
        ({"HOME": None, "TMPDIR": None}, pw_home, "/tmp", []),
        ({"HOME": "/nonexistent/./h/", "TMPDIR": "//var//tmp/"}, "/nonexistent/h", "/var/tmp",
         ["/var/tmp"]),
        ({"HOME": "//root/./x/..", "TMPDIR": "/var/tmp/../tmp"}, "/root", "/var/tmp",
         ["/var/tmp"]),
        ({"TMPDIR": "rel/./a/"}, None, "CWD/rel/a", ["CWD/rel/a"]),
    ]
    for changes, home, temp, temps in cases:
        srv = server_with_env(changes)
        try:
            s = srv.session()
            info = s.call("environment/info")
            s.close()
            cwd = info["cwd"][len("file://"):]
            ctx = (changes, info)
            if home is not None:
                assert info.get("userHomeDir") == "file://" + home, ctx
            assert info["tempDir"] == "file://" + temp.replace("CWD", cwd), ctx
            assert info["temporaryDirectories"] == \
                ["file://" + t.replace("CWD", cwd) for t in temps], ctx
        finally:
            srv.stop()


@needs_own_server
def test_environment_shell_is_the_login_shell(_):
    """codex runs every command with environment/info's shell; it must be the user's
    login shell from passwd whatever $SHELL says (a systemd unit or a CI runner starts
    the server with SHELL unset, and a bash user's ~/.bashrc must still apply)."""
    import pwd
    try:
        login = pwd.getpwuid(os.getuid()).pw_shell
    except KeyError:
        raise TestSkip("this user has no passwd entry")
    name = os.path.basename(login)
    if name not in ("bash", "zsh", "sh"):
        raise TestSkip("login shell %s is not one codex drives" % login)
    for shell in (None, "/usr/bin/fish", "/bin/sh" if name != "sh" else "/bin/bash"):
        srv = server_with_env({"SHELL": shell})
        try:
            s = srv.session()
            info = s.call("environment/info")
            assert info["shell"] == {"name": name, "path": login}, (shell, info["shell"])
            s.close()
        finally:
            srv.stop()


def test_params_decode_errors(srv):
    s = srv.session()
    cwd = "file:///tmp"
    cases = [
        ("process/start", {"argv": ["true"], "cwd": cwd, "env": {}, "tty": False},
         "missing field `processId`"),
        ("process/start", {"processId": "p", "cwd": cwd, "env": {}, "tty": False},
         "missing field `argv`"),
        ("process/start", {"processId": "p", "argv": ["true"], "env": {}, "tty": False},
         "missing field `cwd`"),
        ("process/start", {"processId": "p", "argv": ["true"], "cwd": cwd, "tty": False},
         "missing field `env`"),
        ("process/start", {"processId": "p", "argv": ["true"], "cwd": cwd, "env": {}},
         "missing field `tty`"),
        ("process/start", {"processId": "p", "argv": ["true"], "cwd": cwd, "env": {},
                           "tty": None}, None),
        ("process/start", {"processId": "p", "argv": ["true"], "cwd": cwd, "env": None,
                           "tty": False}, None),
        ("process/start", {"processId": "p", "argv": ["true"], "cwd": cwd, "env": {},
                           "tty": False, "pipeStdin": None}, None),
        ("process/start", {"processId": 5, "argv": ["true"], "cwd": cwd, "env": {},
                           "tty": False}, None),
        ("process/read", {}, "missing field `processId`"),
        ("process/read", {"processId": "p", "afterSeq": -1}, None),
        ("process/read", {"processId": "p", "afterSeq": "1"}, None),
        ("process/terminate", {}, "missing field `processId`"),
        ("process/signal", {"processId": "p"}, "missing field `signal`"),
        # the reference knows only "interrupt"; ours any signal (§11 (g))
        ("process/signal", {"processId": "p", "signal": "kill" if IS_REF else "bogus"},
         "unknown variant `kill`, expected `interrupt`" if IS_REF else
         "unknown signal `bogus`: expected `interrupt`, a name such as `TERM` or "
         "`SIGWINCH`, or a number"),
        ("process/write", {"processId": "p"}, "missing field `chunk`"),
        ("process/write", {"processId": "p", "chunk": "eA==", "writeId": ""},
         "writeId must not be empty"),
    ]
    for method, params, text in cases:
        code, msg = s.error(method, params)
        assert code == -32602, (method, params, code, msg)
        if text is not None:
            assert msg == text, (method, params, msg)
    code, msg = s.error("process/read", None, omit_params=True)
    assert code == -32602, msg
    s.close()


if __name__ == "__main__":
    run_tests(globals())
