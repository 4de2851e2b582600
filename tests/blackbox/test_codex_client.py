#!/usr/bin/env python3
"""Real codex as the client: `codex app-server` drives the server under test through a turn.

The harness is the real codex 0.169.0 binary from npm (tests/blackbox/codex_ref.py: under
ctest the fixture reference/codex-0.169.0 installs it; the test is skipped, naming npm, only
when npm cannot install it). It runs as
`codex app-server` on stdio with a temporary CODEX_HOME whose config.toml points its model
provider at a scripted Responses-API server in this file, so the "model" is a fixed list of
tool calls. `environment/add` registers the server under test (through a TCP proxy that can
drop the connection) and `thread/start` selects it, so every command codex runs and every
file apply_patch writes goes through our WebSocket.

One turn checks what a user of codex would notice:
  0. the project's AGENTS.md, found through the server's fs methods, reaches the model;
  1. exec_command: the output shows the server's HOME and PATH (envPolicy, §5.1.3), no
     profile errors, the server's own environment (a marker only the server has), what
     the server's ~/.bashrc exports and defines (shellSnapshot: codex's shell_snapshot_v2
     feature is turned on, and the server runs with a HOME of the test's), and the exit
     code;
  2. exec_command with tty:true: a TTY (`tty` names a /dev/pts device), left running;
  3. write_stdin to that TTY session: the line is read and echoed back;
  4. exec_command of a command that outlives a dropped WebSocket; the proxy cuts every
     connection; write_stdin then polls the session and gets the output produced after the
     drop (codex reconnects and resumes the session, §9);
  5. exec_command `apply_patch` with a patch: the file changes on disk.
The same test passes against the reference (EXEC_SERVER=ref)."""
import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import http.server
import socketserver
import struct

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa

CODEX_VERSION = "0.169.0"
# Only the server under test has this in its environment, so a command that prints it ran
# there (codex app-server is started without it).
SERVER_MARK_VAR = "EXECBB_SERVER_MARK"
SERVER_MARK = "mark-" + MARKER
# Exported by the server's ~/.bashrc (server_home): a command that prints it got the
# shell snapshot of the server's interactive shell.
RC_MARK_VAR = "EXECBB_RC_MARK"
RC_MARK = "rc-" + MARKER


def login_shell_is_bash():
    import pwd
    try:
        shell = pwd.getpwuid(os.getuid()).pw_shell
    except KeyError:
        return False
    return os.path.basename(shell or "") == "bash"


def codex_binary():
    """The codex the harness runs (TestSkip naming npm when it cannot be had)."""
    return require_reference(CODEX_VERSION)


class ClientFrames:
    """Reads the client-to-server half of one proxied WebSocket connection (the
    HTTP upgrade, then masked frames) and records the JSON-RPC method of every
    message codex sends, so a test can tell which methods a turn used."""

    def __init__(self, sink):
        self.sink = sink
        self.buf = b""
        self.upgraded = False
        self.parts = b""

    def feed(self, data):
        self.buf += data
        if not self.upgraded:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            self.buf = self.buf[end + 4:]
            self.upgraded = True
        while len(self.buf) >= 2:
            b0, b1 = self.buf[0], self.buf[1]
            n, at = b1 & 0x7F, 2
            if n == 126:
                if len(self.buf) < 4:
                    return
                n, at = struct.unpack(">H", self.buf[2:4])[0], 4
            elif n == 127:
                if len(self.buf) < 10:
                    return
                n, at = struct.unpack(">Q", self.buf[2:10])[0], 10
            key = b""
            if b1 & 0x80:
                key, at = self.buf[at:at + 4], at + 4
            if len(self.buf) < at + n:
                return
            payload = self.buf[at:at + n]
            self.buf = self.buf[at + n:]
            if key:
                payload = bytes(c ^ key[i % 4] for i, c in enumerate(payload))
            opcode = b0 & 0x0F
            if opcode in (0, 1, 2):
                self.parts += payload
                if b0 & 0x80:
                    text, self.parts = self.parts, b""
                    try:
                        method = json.loads(text).get("method")
                    except (ValueError, AttributeError):
                        method = None
                    if method:
                        self.sink.append(method)


class Proxy:
    """TCP forwarder between codex and the server under test; cut() drops every
    connection at once, as a network failure would. `methods` lists the JSON-RPC
    methods codex sent, in order."""

    def __init__(self, host, port):
        self.target = (host, port)
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self.lock = threading.Lock()
        self.pairs = []
        self.accepted = 0
        self.closed = False
        self.methods = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(self.target)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.pairs.append((c, u))
                self.accepted += 1
            up, down = self._sinks()
            for a, b, f in ((c, u, up), (u, c, down)):
                threading.Thread(target=self._pump, args=(a, b, f), daemon=True).start()

    def _sinks(self):
        """What sees each direction's bytes (an object with feed(data), or None): the
        methods codex sends; subclasses record more (tests/remote/fleet_lib.py)."""
        return ClientFrames(self.methods), None

    @staticmethod
    def _pump(a, b, frames):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                if frames is not None:
                    frames.feed(d)
                b.sendall(d)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for c, u in pairs:
            for s in (c, u):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
        return len(pairs)

    def close(self):
        self.closed = True
        self.lsock.close()
        self.cut()


def sse_body(items, response_id):
    events = [{"type": "response.created", "response": {"id": response_id}}]
    events += [{"type": "response.output_item.done", "item": it} for it in items]
    events.append({"type": "response.completed", "response": {
        "id": response_id, "usage": {"input_tokens": 1, "input_tokens_details": None,
                                     "output_tokens": 1, "output_tokens_details": None,
                                     "total_tokens": 2}}})
    return "".join("event: %s\ndata: %s\n\n" % (e["type"], json.dumps(e)) for e in events).encode()


def function_call(call_id, name, args):
    return {"type": "function_call", "call_id": call_id, "name": name,
            "arguments": json.dumps(args)}


def assistant_message(text):
    return {"type": "message", "role": "assistant", "id": "msg-final",
            "content": [{"type": "output_text", "text": text}]}


class ScriptedModel:
    """A Responses-API endpoint whose answers come from `steps`: each step is a function
    of the tool outputs so far ({call_id: output text}) returning the output items of one
    model response. Requests after the last step get a final assistant message."""

    def __init__(self, steps):
        self.steps = list(steps)
        self.outputs = {}
        self.requests = 0
        self.errors = []
        self.first_request = None
        model = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _send(self, code, ctype, data):
                self.send_response(code)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(200, "application/json", b'{"models":[]}')

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                try:
                    items = model.answer(json.loads(body))
                except Exception as e:  # noqa: the test thread reports it
                    model.errors.append(repr(e))
                    items = [assistant_message("script error")]
                model.requests += 1
                self._send(200, "text/event-stream", sse_body(items, "resp-%d" % model.requests))

        class Srv(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.httpd = Srv(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def answer(self, body):
        if self.first_request is None:
            self.first_request = json.dumps(body)
        for item in body.get("input", []):
            if item.get("type") in ("function_call_output", "custom_tool_call_output"):
                out = item.get("output")
                if isinstance(out, list):
                    out = "".join(p.get("text", "") for p in out if isinstance(p, dict))
                self.outputs[item["call_id"]] = out
        if not self.steps:
            return [assistant_message("done")]
        return self.steps.pop(0)(self.outputs)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class AppServer:
    """`codex app-server` on stdio, spoken to in its JSON-RPC (one JSON object a line)."""

    def __init__(self, codex, home, cwd, hide=None):
        env = {k: v for k, v in os.environ.items() if k != SERVER_MARK_VAR}
        env.update(CODEX_HOME=home, RUST_LOG="warn")
        self.stderr = tempfile.TemporaryFile()
        argv = [codex, "app-server"]
        if hide:
            # A private mount namespace with an empty tmpfs over `hide`: codex sees only
            # an empty `cwd` there, so whatever it reads or writes in the project has to
            # go through the server under test.
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    'mount -t tmpfs execbb "$1" && mkdir -p "$2" && cd "$2" && '
                    'shift 2 && exec "$@"', "sh", hide, cwd] + argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, env=env,
                                     cwd=cwd)
        self.hidden = bool(hide)
        self.buf = b""
        self.next_id = 0
        self.notes = []

    def send(self, obj):
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def recv(self, deadline):
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("codex app-server said nothing in time; stderr:\n%s"
                              % self.stderr_text())
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if r:
                d = os.read(self.proc.stdout.fileno(), 65536)
                if not d:
                    raise AssertionError("codex app-server exited (rc=%s); stderr:\n%s"
                                         % (self.proc.poll(), self.stderr_text()))
                self.buf += d
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def call(self, method, params, timeout=DEFAULT_TIMEOUT * 3):
        self.next_id += 1
        rid = self.next_id
        self.send({"id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            m = self.recv(deadline)
            if m.get("id") == rid and ("result" in m or "error" in m):
                assert "error" not in m, "%s failed: %r" % (method, m["error"])
                return m["result"]
            self.notes.append(m)

    def wait_method(self, method, timeout):
        deadline = time.monotonic() + timeout
        while True:
            m = self.recv(deadline)
            self.notes.append(m)
            if m.get("method") == method:
                return m

    def stderr_text(self):
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-4000:]

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def server_home():
    """The HOME the server under test runs with: codex captures the user's ~/.bashrc
    for its `bash -lc` commands (shellSnapshot), so a host's own startup files (slow,
    noisy) must not decide the test. This one exports a marker and defines a function."""
    home = tempfile.mkdtemp(prefix="execbb-codex-server-home-")
    with open(os.path.join(home, ".bashrc"), "w") as f:
        f.write("export %s=%s\nexecbb_rc_fn() { echo \"rcfn:$1\"; }\n" % (RC_MARK_VAR, RC_MARK))
    return home


def can_hide():
    """Whether a private mount namespace can be made here (root, unshare present)."""
    try:
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def session_id_of(output):
    m = re.search(r"session ID (\d+)", output or "")
    assert m, "no running session in the tool output: %r" % output
    return int(m.group(1))


@needs_own_server
def test_codex_drives_a_turn(_):
    codex = codex_binary()
    srv_home = server_home()
    # The mark is inherited by the server under test only.
    srv = server_with_env({SERVER_MARK_VAR: SERVER_MARK, "HOME": srv_home})
    home = tempfile.mkdtemp(prefix="execbb-codex-home-")
    hidden = tempfile.mkdtemp(prefix="execbb-codex-project-")
    work = os.path.join(hidden, "work")
    os.mkdir(work)
    proxy = Proxy(srv.host, srv.port)
    cut_count = []

    def cut_then(step):
        def run(outputs):
            cut_count.append(proxy.cut())
            return step(outputs)
        return run

    patch = ("*** Begin Patch\n*** Add File: notes.txt\n+written by apply_patch\n"
             "*** Update File: existing.txt\n@@\n-old line\n+new line\n*** End Patch\n")
    with open(os.path.join(work, "existing.txt"), "w") as f:
        f.write("old line\n")
    agents_mark = "agents-" + MARKER
    with open(os.path.join(work, "AGENTS.md"), "w") as f:
        f.write("Project rule %s: be brief.\n" % agents_mark)
    steps = [
        lambda o: [function_call("env", "exec_command", {
            "cmd": "echo mark=$%s; echo home=$HOME; echo path=$PATH; echo rc=$%s; "
                   "execbb_rc_fn ok; exit 3" % (SERVER_MARK_VAR, RC_MARK_VAR),
            "workdir": work, "yield_time_ms": 5000})],
        lambda o: [function_call("tty", "exec_command", {
            "cmd": "printf 'ready\\n'; IFS= read -r line; echo \"got:$line\"; tty",
            "tty": True, "workdir": work, "yield_time_ms": 1000})],
        lambda o: [function_call("tty-write", "write_stdin", {
            "session_id": session_id_of(o.get("tty")), "chars": "hello\n",
            "yield_time_ms": 5000})],
        lambda o: [function_call("long", "exec_command", {
            "cmd": "echo before-drop; sleep 2; echo after-drop",
            "workdir": work, "yield_time_ms": 500})],
        cut_then(lambda o: [function_call("poll", "write_stdin", {
            "session_id": session_id_of(o.get("long")), "chars": "",
            "yield_time_ms": 15000})]),
        lambda o: [function_call("patch", "exec_command", {
            "cmd": "apply_patch <<'EOF'\n%sEOF\n" % patch, "workdir": work,
            "yield_time_ms": 5000})],
    ]
    model = ScriptedModel(steps)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write('model = "mock-model"\nmodel_provider = "mock"\napproval_policy = "never"\n'
                'sandbox_mode = "danger-full-access"\nsuppress_unstable_features_warning = true\n'
                '\n[model_providers.mock]\n'
                'name = "mock"\nbase_url = "http://127.0.0.1:%d/v1"\nwire_api = "responses"\n'
                'request_max_retries = 0\nstream_max_retries = 0\n'
                # codex sends shellSnapshot only with this (0.169.0: under development)
                '\n[features]\nshell_snapshot_v2 = true\n' % model.port)
    app = AppServer(codex, home, work, hide=hidden if can_hide() else None)
    try:
        app.call("initialize", {"clientInfo": {"name": "execbb", "version": "0.1"},
                                "capabilities": {"experimentalApi": True}})
        app.send({"method": "initialized"})
        app.call("environment/add", {"environmentId": "under-test",
                                     "execServerUrl": "ws://127.0.0.1:%d" % proxy.port})
        thread = app.call("thread/start", {
            "cwd": work, "environments": [{"environmentId": "under-test", "cwd": work}]})
        app.call("turn/start", {"threadId": thread["thread"]["id"],
                                "input": [{"type": "text", "text": "run the script"}]})
        done = app.wait_method("turn/completed", DEFAULT_TIMEOUT * 9)
        assert not model.errors, model.errors
        assert done["params"]["turn"]["status"] == "completed", done
        out = model.outputs
        ctx = "\ntool outputs: %s" % json.dumps(out, indent=1)
        if os.environ.get("EXECBB_VERBOSE"):
            print(ctx, "\nconnections through the proxy:", proxy.accepted)
            print("methods codex sent:", json.dumps(sorted(set(proxy.methods))))

        # 0. the project's AGENTS.md, read through the environment's file system,
        # reached the model (through fs/getMetadata, fs/readFile and fs/watchMissing;
        # codex cannot read it itself)
        if app.hidden:
            assert agents_mark in (model.first_request or ""), "AGENTS.md was not discovered"

        # the proxy saw the turn's requests; an ordinary turn needs no capability
        # discovery method (capabilityRoots/discoverV1 serves selected plugin roots)
        assert "process/start" in proxy.methods and "fs/readFile" in proxy.methods, \
            proxy.methods

        # 1. the server's environment, no profile errors, the exit code
        env_out = out.get("env", "")
        assert "mark=" + SERVER_MARK in env_out, "the command did not run on the server under " \
            "test" + ctx
        home_m = re.search(r"^home=(.*)$", env_out, re.M)
        path_m = re.search(r"^path=(.*)$", env_out, re.M)
        assert home_m and home_m.group(1) == srv_home, ctx
        # the server's ~/.bashrc reached the `bash -lc` command (shellSnapshot). codex
        # picks the shell from the passwd entry of the user it runs as (getpwuid_r, not
        # $SHELL); a user whose login shell is /bin/sh (CI containers) gets `sh -c`, which
        # no snapshot or ~/.bashrc applies to.
        if login_shell_is_bash():
            assert "rc=" + RC_MARK in env_out and "rcfn:ok" in env_out, ctx
        else:
            print("note: login shell is not bash; the shellSnapshot check does not apply")
        assert path_m and "/usr/bin" in path_m.group(1).split(":"), ctx
        for bad in ("command not found", "No such file", "bashrc"):
            assert bad not in env_out, (bad, ctx)
        assert "Process exited with code 3" in env_out, ctx
        execs = {n["params"]["item"]["id"]: n["params"]["item"] for n in app.notes
                 if n.get("method") == "item/completed"
                 and n["params"]["item"].get("type") == "commandExecution"}
        assert execs.get("env", {}).get("exitCode") == 3, execs.get("env")

        # 2 + 3. a TTY session, then a write to it
        assert "ready" in out.get("tty", "") and "Process running with session ID" in \
            out["tty"], ctx
        tty_out = out.get("tty-write", "")
        assert "got:hello" in tty_out and "/dev/pts/" in tty_out, ctx
        assert "Process exited with code 0" in tty_out, ctx

        # 4. the drop: codex reconnected and the session's later output arrived
        assert cut_count and cut_count[0] >= 1, "nothing to cut: %r" % cut_count
        assert proxy.accepted >= 2, "codex did not reconnect (%d connections)" % proxy.accepted
        assert "after-drop" in out.get("poll", ""), ctx
        assert "Process exited with code 0" in out["poll"], ctx

        # no complaint about the executor (version, capabilities) reached the user
        for n in app.notes:
            if n.get("method") in ("warning", "error", "configWarning"):
                text = json.dumps(n).lower()
                assert "executor" not in text and "exec-server" not in text, n

        # 5. apply_patch through the environment's file system
        with open(os.path.join(work, "notes.txt")) as f:
            assert f.read() == "written by apply_patch\n", ctx
        with open(os.path.join(work, "existing.txt")) as f:
            assert f.read() == "new line\n", ctx
    finally:
        app.close()
        model.close()
        proxy.close()
        srv.stop()
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(hidden, ignore_errors=True)
        shutil.rmtree(srv_home, ignore_errors=True)


@needs_own_server
def test_codex_with_capability_token(_):
    """README's remote setup: the server runs with --ws-auth capability-token and codex
    passes the token as `authBearerToken` in environment/add (the reference takes the
    same flags)."""
    codex = codex_binary()
    tmp = tempfile.mkdtemp(prefix="execbb-codex-token-")
    home, work = os.path.join(tmp, "home"), os.path.join(tmp, "work")
    os.mkdir(home)
    os.mkdir(work)
    token = "tok-" + MARKER
    with open(os.path.join(tmp, "token"), "w") as f:
        f.write(token + "\n")
    os.chmod(os.path.join(tmp, "token"), 0o600)  # a secret: the server refuses it open to others
    srv_home = server_home()
    srv = server_with_env({"HOME": srv_home},
                          extra_args=["--ws-auth", "capability-token",
                                      "--ws-token-file", os.path.join(tmp, "token")])
    proxy = Proxy(srv.host, srv.port)
    model = ScriptedModel([lambda o: [function_call("authed", "exec_command", {
        "cmd": "echo authed-ok", "workdir": work, "yield_time_ms": 5000})]])
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write('model = "mock-model"\nmodel_provider = "mock"\napproval_policy = "never"\n'
                'sandbox_mode = "danger-full-access"\n\n[model_providers.mock]\n'
                'name = "mock"\nbase_url = "http://127.0.0.1:%d/v1"\nwire_api = "responses"\n'
                'request_max_retries = 0\nstream_max_retries = 0\n' % model.port)
    app = AppServer(codex, home, work)
    try:
        app.call("initialize", {"clientInfo": {"name": "execbb", "version": "0.1"},
                                "capabilities": {"experimentalApi": True}})
        app.send({"method": "initialized"})
        app.call("environment/add", {"environmentId": "under-test",
                                     "execServerUrl": "ws://127.0.0.1:%d" % proxy.port,
                                     "authBearerToken": token})
        thread = app.call("thread/start", {
            "cwd": work, "environments": [{"environmentId": "under-test", "cwd": work}]})
        app.call("turn/start", {"threadId": thread["thread"]["id"],
                                "input": [{"type": "text", "text": "run it"}]})
        done = app.wait_method("turn/completed", DEFAULT_TIMEOUT * 9)
        assert not model.errors, model.errors
        assert done["params"]["turn"]["status"] == "completed", done
        out = model.outputs.get("authed", "")
        assert "authed-ok" in out and "Process exited with code 0" in out, model.outputs
        assert proxy.accepted >= 1, proxy.accepted
    finally:
        app.close()
        model.close()
        proxy.close()
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(srv_home, ignore_errors=True)


def one_turn(app, url, work, text):
    """initialize, environment/add of the server at url, a thread in work and one turn
    with text; returns turn/completed (asserted completed)."""
    app.call("initialize", {"clientInfo": {"name": "execbb", "version": "0.1"},
                            "capabilities": {"experimentalApi": True}})
    app.send({"method": "initialized"})
    app.call("environment/add", {"environmentId": "under-test", "execServerUrl": url})
    thread = app.call("thread/start", {
        "cwd": work, "environments": [{"environmentId": "under-test", "cwd": work}]})
    app.call("turn/start", {"threadId": thread["thread"]["id"],
                            "input": [{"type": "text", "text": text}]})
    done = app.wait_method("turn/completed", DEFAULT_TIMEOUT * 9)
    assert done["params"]["turn"]["status"] == "completed", done
    return done


def workspace_write_turn(extra_args=(), features=""):
    """One codex turn in workspace-write (codex's default sandbox) against our server:
    the command writes in its workspace, not in .git nor outside; apply_patch writes.
    Returns (the command's tool output, the server's standard error)."""
    codex = codex_binary()
    tmp = tempfile.mkdtemp(prefix="execbb-codex-ww-")
    home, work = os.path.join(tmp, "home"), os.path.join(tmp, "work")
    # outside every root of workspace-write, which makes /tmp and $TMPDIR writable too
    out_dir = tempfile.mkdtemp(prefix="execbb-codex-out-", dir="/var/tmp")
    outside = os.path.join(out_dir, "outside.txt")
    os.makedirs(os.path.join(work, ".git"))
    os.mkdir(home)
    with open(os.path.join(work, ".git", "config"), "w") as f:
        f.write("[core]\n")
    srv_home = server_home()
    srv = server_with_env({"HOME": srv_home},
                          extra_args=["--log-level", "info"] + list(extra_args))
    patch = "*** Begin Patch\n*** Add File: patched.txt\n+by apply_patch\n*** End Patch\n"
    model = ScriptedModel([
        lambda o: [function_call("ww", "exec_command", {
            "cmd": "echo made > made.txt; echo pwned > .git/config; echo pwned > %s; "
                   "cat made.txt" % outside, "workdir": work, "yield_time_ms": 5000})],
        lambda o: [function_call("patch", "exec_command", {
            "cmd": "apply_patch <<'EOF'\n%sEOF\n" % patch, "workdir": work,
            "yield_time_ms": 5000})]])
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write('model = "mock-model"\nmodel_provider = "mock"\napproval_policy = "never"\n'
                'sandbox_mode = "workspace-write"\n\n[model_providers.mock]\n'
                'name = "mock"\nbase_url = "http://127.0.0.1:%d/v1"\nwire_api = "responses"\n'
                'request_max_retries = 0\nstream_max_retries = 0\n%s' % (model.port, features))
    app = AppServer(codex, home, work)
    try:
        one_turn(app, "ws://127.0.0.1:%d" % srv.port, work, "write it")
        assert not model.errors, model.errors
        out = model.outputs.get("ww", "")
        assert "made" in out and open(os.path.join(work, "made.txt")).read() == "made\n", out
        assert open(os.path.join(work, ".git", "config")).read() == "[core]\n", out
        assert not os.path.exists(outside), out
        assert open(os.path.join(work, "patched.txt")).read() == "by apply_patch\n", \
            model.outputs
        return out, srv.stderr_text(1 << 20)
    finally:
        app.close()
        model.close()
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(out_dir, ignore_errors=True)
        shutil.rmtree(srv_home, ignore_errors=True)


@needs_own_server
def test_codex_workspace_write(_):
    """codex's default sandbox (workspace-write) drives our server, with namespaces and
    without them (--sandbox-mode landlock, what a container under Docker's default
    seccomp rules gets): the command writes its workspace, not .git nor outside, and
    apply_patch writes through it; the server's log says which sandbox ran."""
    if IS_REF:
        raise TestSkip("ours: --sandbox-mode is ours")
    _, err = workspace_write_turn()
    assert "sandboxed=true sandbox=namespaces" in err, err[-2000:]
    _, err = workspace_write_turn(["--sandbox-mode", "landlock"])
    assert "sandboxed=true sandbox=landlock" in err, err[-2000:]


@needs_own_server
def test_codex_use_legacy_landlock(_):
    """codex's use_legacy_landlock feature sends useLegacyLandlock: true with each
    sandbox; ours then gives the sandbox without namespaces, and it holds."""
    if IS_REF:
        raise TestSkip("ours: the reference's exec-server ignores useLegacyLandlock")
    _, err = workspace_write_turn(features="\n[features]\nuse_legacy_landlock = true\n")
    assert "sandboxed=true sandbox=landlock" in err, err[-2000:]
    assert "sandbox=namespaces" not in err, err[-2000:]


def main(namespace, per_test_timeout):
    """Installs codex before the clock starts (exit 77 when npm cannot), then runs."""
    try:
        codex_binary()
    except TestSkip as e:
        print("SKIP: %s" % e)
        sys.exit(SKIP)
    run_tests(namespace, per_test_timeout=per_test_timeout)


if __name__ == "__main__":
    main(globals(), 240)
