#!/usr/bin/env python3
"""Real codex as the client of the server under test.

Runs `codex app-server --listen stdio://` (the npm package @openai/codex, installed into
~/.cache/codex-ref when missing) with a temporary CODEX_HOME whose config.toml points a
model provider at a scripted Responses-API server in this file. codex is told about our
server with `environment/add {environmentId, execServerUrl}` (through a small TCP proxy
that can drop the connection) and `thread/start` selects that environment. Each turn's
model replies are scripted tool calls (exec_command, write_stdin, apply_patch) followed by
a final message; the test then checks what codex reported back to the model and what
happened on disk:
  - a command's output shows a non-empty $HOME and PATH and no profile errors (envPolicy);
  - exit codes;
  - a TTY command, and a write to a TTY session;
  - a dropped connection that codex resumes (the TTY session survives the drop);
  - an apply_patch edit whose file changes on disk.

EXEC_SERVER=ref runs the same turns against `codex exec-server`. Exit 77 (skip) only
when codex cannot be installed."""
import json
import os
import re
import queue
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa

CODEX_VERSION = "0.169.0"
CACHE = os.path.expanduser("~/.cache/codex-ref")
CODEX_BIN = os.path.join(CACHE, "node_modules/@openai/codex-linux-x64/vendor/"
                         "x86_64-unknown-linux-musl/bin/codex")
TIMEOUT = 30 * TIMEOUT_SCALE


def ensure_codex():
    """The codex binary, installing the npm package into the cache when missing."""
    if os.access(CODEX_BIN, os.X_OK):
        return CODEX_BIN
    npm = shutil.which("npm")
    if not npm:
        raise TestSkip("codex %s is not installed and npm is not available" % CODEX_VERSION)
    os.makedirs(CACHE, exist_ok=True)
    r = subprocess.run([npm, "install", "--prefix", CACHE, "--no-audit", "--no-fund",
                        "@openai/codex@" + CODEX_VERSION], capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0 or not os.access(CODEX_BIN, os.X_OK):
        raise TestSkip("npm could not install @openai/codex@%s: %s" % (
            CODEX_VERSION, (r.stderr or r.stdout)[-500:]))
    return CODEX_BIN


# ---------------------------------------------------------------------------------------
# Scripted Responses API
# ---------------------------------------------------------------------------------------

class ModelScript:
    """Each POST /v1/responses takes the next scripted reply. A reply is a function of the
    request body returning a list of output items, so later steps can read earlier tool
    outputs (e.g. the session id of a TTY command)."""

    def __init__(self):
        self.replies = queue.Queue()
        self.requests = []
        self.lock = threading.Lock()

    def add(self, reply):
        self.replies.put(reply)

    def next_items(self, body):
        with self.lock:
            self.requests.append(body)
        try:
            reply = self.replies.get_nowait()
        except queue.Empty:
            return [message_item("(no more scripted replies)")]
        return reply(body) if callable(reply) else reply


def message_item(text):
    return {"type": "message", "role": "assistant", "id": "msg_" + uuid.uuid4().hex[:8],
            "content": [{"type": "output_text", "text": text}]}


def call_item(name, args, call_id):
    return {"type": "function_call", "id": "fc_" + call_id, "call_id": call_id, "name": name,
            "arguments": json.dumps(args)}


def custom_call_item(name, text, call_id):
    return {"type": "custom_tool_call", "id": "ctc_" + call_id, "call_id": call_id,
            "name": name, "input": text}


def tool_outputs(body):
    """call_id -> output text of every function/custom tool output in a request."""
    out = {}
    for it in body.get("input", []):
        if it.get("type") in ("function_call_output", "custom_tool_call_output"):
            o = it.get("output")
            if isinstance(o, list):
                o = "".join(p.get("text", "") for p in o if isinstance(p, dict))
            elif isinstance(o, dict):
                o = o.get("content") or json.dumps(o)
            out[it["call_id"]] = o
    return out


def tool_names(body):
    names = {}
    for t in body.get("tools", []):
        names[t.get("name")] = t.get("type")
    return names


def make_handler(script):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_GET(self):
            body = json.dumps({"models": [], "data": []}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            n = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(n)
            try:
                body = json.loads(raw)
            except ValueError:
                body = {}
            if not self.path.endswith("/responses"):
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            items = script.next_items(body)
            rid = "resp_" + uuid.uuid4().hex[:8]
            events = [("response.created", {"type": "response.created",
                                            "response": {"id": rid}})]
            for it in items:
                events.append(("response.output_item.done",
                               {"type": "response.output_item.done", "item": it}))
            events.append(("response.completed", {
                "type": "response.completed",
                "response": {"id": rid, "usage": {
                    "input_tokens": 10, "input_tokens_details": None, "output_tokens": 5,
                    "output_tokens_details": None, "total_tokens": 15}}}))
            data = b"".join(b"event: %s\ndata: %s\n\n" % (e.encode(), json.dumps(d).encode())
                            for e, d in events)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


# ---------------------------------------------------------------------------------------
# A TCP proxy in front of the exec-server, so the test can drop codex's connection
# ---------------------------------------------------------------------------------------

class ClientFrameTap:
    """Decodes the client's (masked) WebSocket text frames to record the JSON-RPC
    methods codex calls; unfragmented frames are all codex sends."""

    def __init__(self, out):
        self.buf = b""
        self.upgraded = False
        self.out = out

    def feed(self, data):
        self.buf += data
        if not self.upgraded:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            self.buf = self.buf[end + 4:]
            self.upgraded = True
        while len(self.buf) >= 2:
            op, ln = self.buf[0] & 0x0F, self.buf[1] & 0x7F
            at = 2
            if ln == 126:
                if len(self.buf) < 4:
                    return
                ln, at = int.from_bytes(self.buf[2:4], "big"), 4
            elif ln == 127:
                if len(self.buf) < 10:
                    return
                ln, at = int.from_bytes(self.buf[2:10], "big"), 10
            masked = self.buf[1] & 0x80
            key = self.buf[at:at + 4] if masked else b"\0\0\0\0"
            at += 4 if masked else 0
            if len(self.buf) < at + ln:
                return
            payload = bytes(c ^ key[i % 4] for i, c in enumerate(self.buf[at:at + ln]))
            self.buf = self.buf[at + ln:]
            if op in (1, 2):
                try:
                    m = json.loads(payload)
                except ValueError:
                    continue
                if isinstance(m, dict) and "method" in m:
                    self.out.append((m["method"], m.get("params")))


class DropProxy:
    def __init__(self, host, port):
        self.target = (host, port)
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(8)
        self.port = self.ls.getsockname()[1]
        self.conns = []
        self.accepted = 0
        self.methods = []  # (method, params) of every request codex sent, in order
        self.lock = threading.Lock()
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(self.target)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.conns.append((c, u))
                self.accepted += 1
            threading.Thread(target=self._pump, args=(c, u), daemon=True).start()

    def _pump(self, a, b):
        socks = [a, b]
        tap = ClientFrameTap(self.methods)
        try:
            while True:
                r, _, _ = select.select(socks, [], [])
                for s in r:
                    d = s.recv(65536)
                    if not d:
                        raise OSError
                    if s is a:
                        tap.feed(d)
                    (b if s is a else a).sendall(d)
        except OSError:
            for s in socks:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def drop_all(self):
        with self.lock:
            conns, self.conns = self.conns, []
        for c, u in conns:
            for s in (c, u):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.stopping = True
        self.drop_all()
        self.ls.close()


# ---------------------------------------------------------------------------------------
# codex app-server over stdio
# ---------------------------------------------------------------------------------------

class AppServer:
    def __init__(self, codex, home, workdir):
        env = dict(os.environ)
        env["CODEX_HOME"] = home
        env["RUST_LOG"] = env.get("CODEX_TEST_RUST_LOG", "warn")
        self.stderr = open(os.path.join(home, "app-server.stderr"), "wb")
        self.proc = subprocess.Popen([codex, "app-server", "--listen", "stdio://"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, cwd=workdir, env=env)
        self.home = home
        self.msgs = queue.Queue()
        self.notes = []
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.msgs.put(json.loads(line))
            except ValueError:
                pass
        self.msgs.put(None)

    def send(self, obj):
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def _handle(self, m):
        if m is None:
            raise AssertionError("codex app-server exited; stderr:\n" + self.stderr_text())
        if "method" in m and "id" in m:
            # a server request (approvals and the like): decline what we do not expect
            self.send({"id": m["id"], "error": {"code": -32601, "message": "not supported"}})
            self.notes.append(m)
        elif "method" in m:
            self.notes.append(m)

    def request(self, method, params, timeout=TIMEOUT):
        self.next_id += 1
        rid = self.next_id
        self.send({"id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("no reply to %s; stderr:\n%s" % (method, self.stderr_text()))
            try:
                m = self.msgs.get(timeout=left)
            except queue.Empty:
                continue
            if m is not None and m.get("id") == rid and "method" not in m:
                if "error" in m:
                    raise AssertionError("%s failed: %s" % (method, m["error"]))
                return m["result"]
            self._handle(m)

    def wait_note(self, pred, timeout=TIMEOUT, start=0):
        deadline = time.monotonic() + timeout
        while True:
            for n in self.notes[start:]:
                if pred(n):
                    return n
            start = len(self.notes)
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("notification not seen; last: %s\nstderr:\n%s" % (
                    json.dumps(self.notes[-5:])[:3000], self.stderr_text()))
            try:
                m = self.msgs.get(timeout=left)
            except queue.Empty:
                continue
            self._handle(m)

    def stderr_text(self):
        try:
            with open(os.path.join(self.home, "app-server.stderr"), "rb") as f:
                return f.read()[-4000:].decode(errors="replace")
        except OSError:
            return ""

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


CONFIG = """model = "mock-model"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "danger-full-access"
include_apply_patch_tool = true

[model_providers.mock]
name = "mock"
base_url = "http://127.0.0.1:{port}/v1"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
supports_websockets = false
"""


class Rig:
    """Everything one codex run needs; torn down by close()."""

    def __init__(self, srv, token=None):
        self.codex = ensure_codex()
        self.srv = srv
        self.app = self.proxy = self.http = None
        self.tmp = tempfile.mkdtemp(prefix="execbb-codex-")
        try:
            self._setup(srv, token)
        except BaseException:
            self.close()
            raise

    def _setup(self, srv, token):
        self.home = os.path.join(self.tmp, "home")
        self.work = os.path.join(self.tmp, "work")
        os.makedirs(self.home)
        os.makedirs(self.work)
        self.script = ModelScript()
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(self.script))
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        with open(os.path.join(self.home, "config.toml"), "w") as f:
            f.write(CONFIG.format(port=self.http.server_address[1]))
        probe = srv.session(headers=["Authorization: Bearer " + token] if token else ())
        self.capabilities = probe.call("environment/info", {})["capabilities"]
        probe.close()
        self.proxy = DropProxy(srv.host, srv.port)
        self.agents_marker = "agents-md-" + uuid.uuid4().hex[:8]
        with open(os.path.join(self.work, "AGENTS.md"), "w") as f:
            f.write("Project note: %s\n" % self.agents_marker)
        self.app = AppServer(self.codex, self.home, self.work)
        self.app.request("initialize", {"clientInfo": {"name": "execbb", "version": "0"},
                                        "capabilities": {"experimentalApi": True}})
        self.app.send({"method": "initialized"})
        add = {"environmentId": "bb", "execServerUrl": "ws://127.0.0.1:%d" % self.proxy.port}
        if token:
            add["authBearerToken"] = token
        self.app.request("environment/add", add)
        r = self.app.request("thread/start", {
            "cwd": self.work, "environments": [{"environmentId": "bb", "cwd": self.work}]})
        self.thread_id = r["thread"]["id"]

    def turn(self, text, timeout=TIMEOUT):
        start = len(self.app.notes)
        self.app.request("turn/start", {"threadId": self.thread_id,
                                        "input": [{"type": "text", "text": text}]})
        n = self.app.wait_note(lambda n: n.get("method") == "turn/completed", timeout, start)
        return n, self.app.notes[start:]

    def close(self):
        if self.app:
            self.app.close()
        if self.proxy:
            self.proxy.close()
        if self.http:
            self.http.shutdown()
            self.http.server_close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def completed_commands(notes):
    return [n["params"]["item"] for n in notes if n.get("method") == "item/completed"
            and n["params"]["item"].get("type") == "commandExecution"]


def session_id_of(output):
    m = re.search(r"session ID (\d+)", output or "")
    assert m, "no session id in tool output: %r" % output
    return int(m.group(1))


@needs_own_server
def test_codex_turns(_):
    srv = Server()
    rig = None
    try:
        rig = Rig(srv)
        run_turns(rig)
    finally:
        if rig:
            rig.close()
        srv.stop()


@needs_own_server
def test_codex_with_capability_token(_):
    # --ws-auth capability-token on the server, authBearerToken in environment/add
    token = "tok-" + uuid.uuid4().hex
    tdir = tempfile.mkdtemp(prefix="execbb-token-")
    tfile = os.path.join(tdir, "token")
    with open(tfile, "w") as f:
        f.write(token + "\n")
    srv = Server(extra_args=["--ws-auth", "capability-token", "--ws-token-file", tfile])
    rig = None
    try:
        rig = Rig(srv, token=token)
        rig.script.add([call_item("exec_command", {"cmd": "echo authed", "workdir": rig.work},
                                  "a1")])
        rig.script.add([message_item("done")])
        done, _ = rig.turn("run it")
        assert done["params"]["turn"]["status"] == "completed", done
        out = tool_outputs(rig.script.requests[-1])["a1"]
        assert "authed" in out and "exited with code 0" in out, out
    finally:
        if rig:
            rig.close()
        srv.stop()
        shutil.rmtree(tdir, ignore_errors=True)


def run_turns(rig):
    sc = rig.script
    # --- turn 1: environment of a command (envPolicy), exit codes ----------------
    sc.add([call_item("exec_command", {
        "cmd": "echo HOME=$HOME; echo PATH=$PATH; exit 3", "workdir": rig.work}, "env1")])
    sc.add([call_item("exec_command", {"cmd": "echo fine", "workdir": rig.work}, "ok1")])
    sc.add([message_item("turn 1 done")])
    done, notes = rig.turn("show the environment")
    assert done["params"]["turn"]["status"] == "completed", done
    outs = tool_outputs(sc.requests[-1])
    env_out = outs["env1"]
    assert "Process exited with code 3" in env_out, env_out
    assert re.search(r"^HOME=/\S+$", env_out, re.M), env_out
    assert re.search(r"^PATH=\S*/usr/bin\S*$", env_out, re.M), env_out
    assert "command not found" not in env_out and "No such file" not in env_out, env_out
    assert "Process exited with code 0" in outs["ok1"] and "fine" in outs["ok1"], outs
    codes = {c["id"]: c["exitCode"] for c in completed_commands(notes)}
    assert codes == {"env1": 3, "ok1": 0}, codes

    # --- turn 2: a TTY command, a dropped connection, a write to the TTY session ----
    sc.add([call_item("exec_command", {
        "cmd": "tty; printf 'ready\\n'; IFS= read -r line; echo got:$line",
        "workdir": rig.work, "tty": True, "yield_time_ms": 1000}, "tty1")])
    accepted_before = []

    def drop_then_write(body):
        out = tool_outputs(body)["tty1"]
        sid = session_id_of(out)
        accepted_before.append(rig.proxy.accepted)
        rig.proxy.drop_all()
        return [call_item("write_stdin", {"session_id": sid, "chars": "hello\n",
                                          "yield_time_ms": 3000}, "w1")]

    sc.add(drop_then_write)
    sc.add([message_item("turn 2 done")])
    done, notes = rig.turn("use a terminal")
    assert done["params"]["turn"]["status"] == "completed", done
    outs = tool_outputs(sc.requests[-1])
    assert "/dev/pts/" in outs["tty1"] and "ready" in outs["tty1"], outs["tty1"]
    assert "got:hello" in outs["w1"], outs["w1"]
    assert "Process exited with code 0" in outs["w1"], outs["w1"]
    assert rig.proxy.accepted > accepted_before[0], "codex did not reconnect"

    # --- turn 3: apply_patch edits a file -------------------------------------------
    target = os.path.join(rig.work, "notes.txt")
    with open(target, "w") as f:
        f.write("alpha\nbeta\n")
    patch = ("*** Begin Patch\n*** Update File: notes.txt\n@@\n alpha\n-beta\n+gamma\n"
             "*** Add File: added.txt\n+created by apply_patch\n*** End Patch\n")
    sc.add([call_item("exec_command", {
        "cmd": "apply_patch <<'EOF'\n" + patch + "EOF\n", "workdir": rig.work}, "p1")])
    sc.add([message_item("turn 3 done")])
    done, notes = rig.turn("edit the file")
    assert done["params"]["turn"]["status"] == "completed", done
    with open(target) as f:
        assert f.read() == "alpha\ngamma\n", tool_outputs(sc.requests[-1])
    with open(os.path.join(rig.work, "added.txt")) as f:
        assert f.read() == "created by apply_patch\n"

    # --- what codex sent on the wire ------------------------------------------------
    # AGENTS.md of the environment's cwd reached the model (read through fs/*)
    assert rig.agents_marker in json.dumps(sc.requests[0]), "AGENTS.md not in the prompt"
    sent = rig.proxy.methods
    reads = [p["path"] for m, p in sent if m == "fs/readFile"]
    assert any(r.endswith("/AGENTS.md") for r in reads), reads
    if rig.capabilities.get("fsWatchMissing"):
        assert any(m == "fs/watchMissing" for m, _ in sent), [m for m, _ in sent]
    starts = [p for m, p in sent if m == "process/start"]
    assert len(starts) == 3 and all(p.get("envPolicy") for p in starts), starts
    inits = [p for m, p in sent if m == "initialize"]
    assert len(inits) >= 2 and inits[-1].get("resumeSessionId"), inits  # resumed after the drop
    writes = [p for m, p in sent if m == "process/write"]
    assert writes and writes[0]["writeId"], writes
    written = [p["path"] for m, p in sent if m == "fs/writeFile"]
    assert any(w.endswith("/notes.txt") for w in written), written  # apply_patch via fs/*


if __name__ == "__main__":
    try:
        ensure_codex()
    except TestSkip as e:
        print("SKIP: %s" % e)
        sys.exit(SKIP)
    run_tests(globals(), per_test_timeout=120)
