#!/usr/bin/env python3
"""The audit trail and terminal recordings (issue 49, docs/AUDIT.md): --audit-log writes one
JSON record per client action into a SHA-256 hash chain, --record-dir an asciicast v2 file
per PTY process.

The main test drives a realistic session (a refused login, a command, a shell on a terminal
with a resize, file writes, a removal, an http/request, a connection the managed network
denies, a resume) and checks every record against what happened, field by field; that
`exec-server audit verify` passes; that `asciinema cat` of the shell's recording gives back
the bytes the client got; and, after one record is edited and another removed, that
`audit verify` names both places. The others: a restart and a logrotate-style rotation keep
one chain, a log that cannot be written is loud and (with --audit-required) refuses work,
fs reads and typed input are kept only when asked for, the option rules, and the fleet
registry's records (registrations, connects, validations, refusals, token changes), whose
harness key digest is the one the executor's relay login carries. Ours only: the
reference has no audit trail."""
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import termios
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
from harness import *  # noqa
import fleet_lib  # noqa: E402
import remote_testlib  # noqa: E402

CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netproxy_client.py")
TOKEN = "audit-test-token-" + "7" * 32
PATH_ENV = "/usr/bin:/bin"


class Echo(BaseHTTPRequestHandler):
    """The http/request target: answers "pong" to anything."""
    protocol_version = "HTTP/1.1"

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        self.send_response(200)
        self.send_header("Content-Length", "4")
        self.end_headers()
        self.wfile.write(b"pong")

    do_GET = do_POST = handle_any

    def log_message(self, *a):
        pass


_httpd = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
threading.Thread(target=_httpd.serve_forever, daemon=True).start()
HTTP_PORT = _httpd.server_address[1]
# The managed proxy's name lookups (the server's test knob, docs/FLAGS.md).
os.environ["EXEC_SERVER_TEST_RESOLVE"] = "np-deny.test=127.0.0.1"


def read_log(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def verify(*paths):
    return subprocess.run([SERVER_PATH, "audit", "verify", *paths], capture_output=True,
                          text=True, timeout=30)


def only(recs, type_, **match):
    """The one record of type_ whose fields include match."""
    got = [r for r in recs if r["type"] == type_ and all(r.get(k) == v for k, v in match.items())]
    assert len(got) == 1, (type_, match, got)
    return got[0]


def keys(rec):
    """The record's fields but the chain's and the time."""
    return set(rec) - {"seq", "prev", "time"}


def peer_of(rpc):
    host, port = rpc.t.ws.peer
    return "%s:%d" % (host, port)


def asciinema_cat(path):
    """What `asciinema cat` prints for a recording. It opens /dev/tty (to put it in raw
    mode), so it runs with a terminal of its own; its output goes to a pipe."""
    master, slave = os.openpty()
    try:
        p = subprocess.run(["asciinema", "cat", path], stdin=slave, capture_output=True,
                           timeout=60, start_new_session=True,
                           preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
                           env=dict(os.environ, PYTHONIOENCODING="utf-8"))
    finally:
        os.close(master)
        os.close(slave)
    assert p.returncode == 0, p.stderr
    return p.stdout


def netproxy_params(domains):
    return {"proxy": {"enabled": True, "enableSocks5": False, "enableSocks5Udp": False,
                      "allowUpstreamProxy": False, "dangerouslyAllowAllUnixSockets": False,
                      "mode": "full", "domains": domains, "unixSockets": None,
                      "allowLocalBinding": True}}


def shell_session(s, rec_input=False):
    """A shell on a terminal: a line printed with UTF-8 and escape sequences, a resize it
    sees, exit. Returns the bytes the client got."""
    s.start("shell", ["/bin/sh"], tty=True, env={"PATH": PATH_ENV, "PS1": "$ ", "TERM": "xterm"},
            size={"rows": 24, "cols": 80})
    pty = lambda: s.output_so_far("shell")["pty"]  # noqa: E731
    s.wait_for(lambda: b"$ " in pty(), process_id="shell", what="the prompt")
    s.write("shell", b"printf 'h\\303\\251llo \\033[1mbold\\033[0m \\342\\202\\254\\n'\n")
    s.wait_for(lambda: "héllo \x1b[1mbold\x1b[0m €".encode() in pty(), process_id="shell",
               what="the printf")
    assert s.call("process/resize", {"processId": "shell", "rows": 30, "cols": 100}) == {}
    s.write("shell", b"stty size\n")
    s.wait_for(lambda: b"30 100" in pty(), process_id="shell", what="the new size")
    s.write("shell", b"exit 0\n")
    out = s.collect_until_closed("shell")
    assert out["exit_code"] == 0, out
    return out["pty"]


def check_recording(path, pty, rows=24, cols=80, typed=None):
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    head = json.loads(lines[0])
    assert head["version"] == 2 and head["width"] == cols and head["height"] == rows, head
    assert head["command"] == "/bin/sh" and isinstance(head["timestamp"], int), head
    events = [json.loads(x) for x in lines[1:]]
    times = [e[0] for e in events]
    assert times == sorted(times), times
    assert [e[2] for e in events if e[1] == "r"] == ["100x30"], events
    inputs = "".join(e[2] for e in events if e[1] == "i")
    assert inputs == (typed or ""), (inputs, typed)
    assert "".join(e[2] for e in events if e[1] == "o").encode() == pty
    if shutil.which("asciinema"):
        assert asciinema_cat(path) == pty
    else:
        print("SKIP: asciinema is not installed (deps/debian-packages.txt); the recording's "
              "output events were compared instead of `asciinema cat`")


def tamper_and_verify(log, work, recs):
    """Edits one record and removes another in a copy: verify names both places."""
    lines = open(log, encoding="utf-8").read().splitlines(True)
    edit = next(i for i, r in enumerate(recs) if r["type"] == "process.start"
                and r["process"] == "cmd")
    drop = next(i for i, r in enumerate(recs) if r["type"] == "fs.remove")
    assert "echo out" in lines[edit]
    lines[edit] = lines[edit].replace("echo out", "echo OUT")
    del lines[drop]
    bad = os.path.join(work, "tampered.log")
    with open(bad, "w", encoding="utf-8") as f:
        f.writelines(lines)
    v = verify(bad)
    assert v.returncode == 1, (v.returncode, v.stdout, v.stderr)
    seq_edit, seq_drop = recs[edit]["seq"], recs[drop]["seq"]
    # line numbers from 1; the removed record's successor moved up one line
    assert "%s:%d: record seq %d was changed" % (bad, edit + 1, seq_edit) in v.stdout, v.stdout
    assert "%s:%d: record seq %d is missing before this line" % (bad, drop + 1, seq_drop) \
        in v.stdout, v.stdout
    assert "2 break(s)" in v.stdout, v.stdout


@ours_only
@needs_own_server
def test_session_recorded(_):
    work = tempfile.mkdtemp(prefix="audit-")
    try:
        session_recorded(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def session_recorded(work):
    log, rec, files = (os.path.join(work, n) for n in ("audit.log", "rec", "files"))
    os.mkdir(rec)
    os.mkdir(files)
    tok = os.path.join(work, "token")
    with open(os.open(tok, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(TOKEN + "\n")  # the server refuses a token file others may read
    auth = "Authorization: Bearer " + TOKEN
    srv = Server(extra_args=["--ws-auth", "capability-token", "--ws-token-file", tok,
                             "--audit-log", log, "--record-dir", rec])
    with srv:
        status, _, _ = http_raw(srv.host, srv.port, (
            "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            "Authorization: Bearer wrong-secret-value\r\n\r\n"))
        assert status == 401
        s = srv.session(headers=[auth])
        sid, peer = s.session_id, peer_of(s)
        # a command
        s.start("cmd", ["/bin/sh", "-c", "echo out; echo err >&2; exit 3"],
                env={"PATH": PATH_ENV, "SECRET_TOKEN": "sekrit-env-value"})
        assert s.collect_until_closed("cmd")["exit_code"] == 3
        # a sandboxed command (where the host cannot sandbox, its refusal is the record)
        boxed = s.request("process/start", {
            "processId": "boxed", "argv": ["/bin/true"], "cwd": "file://" + files,
            "env": {"PATH": PATH_ENV}, "tty": False, "sandbox": {
                "permissions": {"type": "managed", "network": "restricted", "file_system": {
                    "type": "restricted", "entries": [
                        {"path": {"type": "special", "value": {"kind": "root"}},
                         "access": "read"},
                        {"path": {"type": "path", "path": "file://" + files},
                         "access": "write"}]}},
                "windowsSandboxLevel": "disabled"}})
        if "result" in boxed:
            s.collect_until_closed("boxed")
        # a shell on a terminal
        pty = shell_session(s)
        # writes and a removal
        uri = lambda *p: "file://" + os.path.join(files, *p)  # noqa: E731
        s.call("fs/writeFile", {"path": uri("a.txt"), "dataBase64": b64("hello audit")})
        s.call("fs/readFile", {"path": uri("a.txt")})  # a read: not recorded by default
        s.call("fs/createDirectory", {"path": uri("sub")})
        s.call("fs/copy", {"sourcePath": uri("a.txt"), "destinationPath": uri("sub", "b.txt"),
                           "recursive": False})
        s.call("fs/open", {"handleId": "h1", "path": uri("c.bin"), "mode": "replace"})
        s.call("fs/writeBlock", {"handleId": "h1", "offset": 0, "chunk": b64(b"12345")})
        s.call("fs/close", {"handleId": "h1"})
        s.call("fs/setPermissions", {"path": uri("a.txt"), "mode": 0o640})
        s.call("fs/writeFile", {"path": uri("d.tmp"), "dataBase64": b64("d")})
        s.call("fs/rename", {"sourcePath": uri("d.tmp"), "destinationPath": uri("d.txt")})
        s.call("fs/remove", {"path": uri("sub"), "recursive": True})
        # an http/request whose URL, header and body hold secrets
        r = s.call("http/request", {
            "method": "POST", "requestId": "r1",
            "url": "http://user:hunter2@127.0.0.1:%d/path-secret?token=query-secret" % HTTP_PORT,
            "headers": [{"name": "Authorization", "value": "Bearer header-secret"}],
            "bodyBase64": b64("body-secret")})
        assert r["status"] == 200, r
        # a connection the managed network denies
        s.start("net", [sys.executable, CLIENT, json.dumps(
            {"mode": "http", "url": "http://np-deny.test:%d/x" % HTTP_PORT})],
            env={"PATH": os.environ.get("PATH", PATH_ENV)},
            networkProxy=netproxy_params({"np-deny.test": "deny"}))
        net = s.collect_until_closed("net")
        assert json.loads(net["stdout"])["status"] == 403, net
        # a resume on a new connection
        s.close()
        s2 = srv.session(init=False, headers=[auth])

        def resumed():
            m = s2.request("initialize", {"clientName": "blackbox", "resumeSessionId": sid})
            return "result" in m
        wait_until(resumed, what="the resume")
        s2.notify("initialized", {})
        peer2 = peer_of(s2)
        s2.close()
    recs = read_log(log)
    raw = open(log, encoding="utf-8").read()
    v = verify(log)
    assert v.returncode == 0 and "the chain holds" in v.stdout, (v.stdout, v.stderr)
    assert [r["seq"] for r in recs] == list(range(1, len(recs) + 1))
    for r in recs:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", r["time"]), r

    start = only(recs, "audit.open")
    assert keys(start) == {"type", "reason", "program", "version", "pid"}, start
    assert start["reason"] == "start" and start["pid"] == srv.pid and recs[0] is start
    assert recs[-1]["type"] == "audit.close", recs[-1]
    refused = only(recs, "login", result="refused")
    assert keys(refused) == {"type", "result", "transport", "peer", "target", "auth", "reason"}
    assert refused["reason"] == "invalid_token" and refused["auth"] == "capability-token"
    assert refused["transport"] == "websocket" and refused["target"] == "websocket"
    assert refused["peer"].startswith("127.0.0.1:"), refused
    login = only(recs, "login", result="ok", peer=peer)
    assert keys(login) == {"type", "result", "transport", "peer", "target", "auth", "tokenId",
                           "identity"}, login
    assert login["tokenId"] == hashlib.sha256(TOKEN.encode()).hexdigest()[:16], login
    assert re.fullmatch(r"[0-9a-f]{16}", login["identity"]), login
    started = only(recs, "session.start")
    assert started == dict(started, session=sid, peer=peer, transport="websocket",
                           identity=login["identity"], client="blackbox"), started
    assert keys(started) == {"type", "session", "peer", "transport", "identity", "client"}

    cmd = only(recs, "process.start", process="cmd")
    assert cmd == dict(cmd, session=sid, argv=["/bin/sh", "-c", "echo out; echo err >&2; exit 3"],
                       cwd=srv.workdir, tty=False, sandbox=None, networkProxy=False), cmd
    assert set(cmd["envNames"]) == {"PATH", "SECRET_TOKEN", MARKER_VAR}, cmd
    assert isinstance(cmd["pid"], int) and cmd["pid"] > 0 and "recording" not in cmd, cmd
    end = only(recs, "process.end", process="cmd")
    assert end == dict(end, session=sid, pid=cmd["pid"], reason="exited", exitCode=3,
                       signal=None, bytesOut=len(b"out\nerr\n"), terminated=False), end
    assert isinstance(end["durationMs"], int) and end["seq"] > cmd["seq"], end

    box = only(recs, "process.start", process="boxed")
    assert box["sandbox"] == {"read": "all", "write": [os.path.realpath(files)],
                              "network": "restricted"}, box
    assert ("pid" in box) == ("result" in boxed) and ("error" in box) == ("error" in boxed), box

    shell = only(recs, "process.start", process="shell")
    assert shell["tty"] is True and shell["argv"] == ["/bin/sh"], shell
    assert os.listdir(rec) == [shell["recording"]], (os.listdir(rec), shell)
    assert shell["recording"].startswith(sid + ".shell."), shell
    shell_end = only(recs, "process.end", process="shell")
    assert shell_end["exitCode"] == 0 and shell_end["bytesOut"] == len(pty), shell_end
    check_recording(os.path.join(rec, shell["recording"]), pty)

    p = lambda *n: os.path.join(files, *n)  # noqa: E731
    w, _ = [r for r in recs if r["type"] == "fs.write"]
    assert w == dict(w, session=sid, path=p("a.txt"), bytes=11, sandboxed=False), w
    assert keys(w) == {"type", "session", "path", "bytes", "sandboxed"}, w
    assert not [r for r in recs if r["type"] == "fs.read"], "reads need --audit-fs-reads"
    mk = only(recs, "fs.mkdir")
    assert mk == dict(mk, session=sid, path=p("sub"), recursive=True), mk
    cp = only(recs, "fs.copy")
    assert cp == dict(cp, source=p("a.txt"), destination=p("sub", "b.txt"), recursive=False), cp
    op = only(recs, "fs.open")
    assert op == dict(op, path=p("c.bin"), handle="h1", mode="replace"), op
    wb = only(recs, "fs.writeBlock")
    assert wb == dict(wb, session=sid, handle="h1", path=p("c.bin"), offset=0, bytes=5), wb
    ch = only(recs, "fs.setPermissions")
    assert ch == dict(ch, session=sid, path=p("a.txt"), mode="0640") and "error" not in ch, ch
    mv = only(recs, "fs.rename")
    assert mv == dict(mv, session=sid, source=p("d.tmp"), destination=p("d.txt")), mv
    assert keys(mv) == {"type", "session", "source", "destination"}, mv
    rm = only(recs, "fs.remove")
    assert rm == dict(rm, session=sid, path=p("sub"), recursive=True, force=True), rm

    http = only(recs, "http.request")
    assert http == dict(http, session=sid, method="POST", host="127.0.0.1:%d" % HTTP_PORT,
                        status=200, requestBytes=len("body-secret"), responseBytes=4,
                        stream=False), http
    assert "error" not in http, http

    dec = only(recs, "net.decision", process="net")
    assert dec == dict(dec, session=sid, host="np-deny.test", port=HTTP_PORT, protocol="http",
                       method="GET", decision="deny", source="baseline_policy",
                       reason="denied"), dec
    net_start = only(recs, "process.start", process="net")
    assert net_start["sandbox"] is None and net_start["networkProxy"] is True, net_start
    assert dec["seq"] > net_start["seq"], (net_start, dec)

    # the first connection's close; the second's may come before the stop too
    detach = only(recs, "session.detach", peer=peer)
    assert detach == dict(detach, session=sid, transport="websocket"), detach
    resume = only(recs, "session.resume")
    assert resume == dict(resume, session=sid, peer=peer2, identity=login["identity"]), resume
    assert detach["seq"] < resume["seq"]
    assert only(recs, "login", result="ok", peer=peer2)["seq"] < resume["seq"]
    assert only(recs, "session.end")["reason"] == "shutdown"

    # Nothing secret: environment values, tokens, bodies, URL paths and queries, contents.
    for secret in ("sekrit-env-value", TOKEN, "wrong-secret-value", "hunter2", "query-secret",
                   "path-secret", "header-secret", "body-secret", "hello audit", "12345"):
        assert secret not in raw, secret
    tamper_and_verify(log, work, recs)


@ours_only
@needs_own_server
def test_restart_and_rotation_keep_one_chain(_):
    work = tempfile.mkdtemp(prefix="audit-")
    try:
        log = os.path.join(work, "audit.log")
        for round_ in range(2):  # the second start goes on from the first's last record
            with Server(extra_args=["--audit-log", log]) as srv:
                s = srv.session()
                s.start("r%d" % round_, ["/bin/true"])
                s.collect_until_closed("r%d" % round_)
                if round_ == 1:  # logrotate: move the file, then SIGHUP
                    os.rename(log, log + ".1")
                    srv.proc.send_signal(signal.SIGHUP)
                    wait_until(lambda: os.path.exists(log), what="the reopened log")
                    s.start("after", ["/bin/true"])
                    s.collect_until_closed("after")
                s.close()
        old, new = read_log(log + ".1"), read_log(log)
        starts = [r for r in old if r["type"] == "audit.open"]
        assert [r["reason"] for r in starts] == ["start", "start"], starts
        second = starts[1]
        before = old[old.index(second) - 1]
        assert before["type"] == "audit.close" and second["seq"] == before["seq"] + 1, second
        assert new[0]["type"] == "audit.open" and new[0]["reason"] == "reopen", new[0]
        assert new[0]["seq"] == old[-1]["seq"] + 1, (old[-1], new[0])
        assert only(new, "process.start", process="after")
        v = verify(log + ".1", log)
        assert v.returncode == 0 and "the chain holds" in v.stdout, v.stdout
        alone = verify(log)
        assert alone.returncode == 0, alone.stdout
        assert "the chain starts at seq %d" % new[0]["seq"] in alone.stdout, alone.stdout
        swapped = verify(log, log + ".1")
        assert swapped.returncode == 1 and "records out of order" in swapped.stdout
    finally:
        shutil.rmtree(work, ignore_errors=True)


@ours_only
@needs_own_server
def test_records_reach_the_file_while_running(_):
    """Records are written while the server runs and sits idle, within a fraction of a
    second of their action: a process's end, and a session's detach, which is decided in
    the connection's close (after the loop iteration's other work)."""
    work = tempfile.mkdtemp(prefix="audit-")
    try:
        log = os.path.join(work, "audit.log")

        def types():
            with open(log, encoding="utf-8") as f:
                return [json.loads(line)["type"] for line in f]
        with Server(extra_args=["--audit-log", log]) as srv:
            s = srv.session()
            s.start("p", ["/bin/true"])
            s.collect_until_closed("p")
            wait_until(lambda: "process.end" in types(), timeout=5, what="process.end")
            s.close()
            wait_until(lambda: "session.detach" in types(), timeout=5, what="session.detach")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def metric(srv, name):
    status, _, body = http_raw(srv.host, srv.port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200
    m = re.search(r"^%s (\d+)$" % re.escape(name), body.decode(), re.M)
    return int(m.group(1)) if m else None


@ours_only
@needs_own_server
def test_unwritable_log(_):
    """A log whose writes fail (/dev/full: ENOSPC) is said once at error level and counted;
    with --audit-required the work it would record is refused, reads and stops are not."""
    with Server(extra_args=["--audit-log", "/dev/full", "--audit-required"]) as srv:
        s = srv.session()  # its login and session records fail to be written
        wait_until(lambda: metric(srv, "exec_server_audit_log_writable") == 0,
                   what="the failed write")
        code, msg = s.error("process/start", {"processId": "x", "argv": ["/bin/true"],
                                              "cwd": "file:///tmp", "env": {}, "tty": False})
        assert code == -32603, (code, msg)
        assert msg == ("process/start refused: the audit log cannot be written "
                       "(--audit-required)"), msg
        target = os.path.join(srv.workdir, "never-written")  # the server's scratch directory
        code, msg = s.error("fs/writeFile", {"path": "file://" + target, "dataBase64": b64("x")})
        assert code == -32603 and "--audit-required" in msg, msg
        assert not os.path.exists(target)
        code, msg = s.error("fs/rename", {"sourcePath": "file://" + srv.workdir,
                                          "destinationPath": "file://" + target})
        assert code == -32603 and "--audit-required" in msg, msg
        assert s.call("environment/status") == {"status": "ready"}
        assert s.call("process/list", {}) is not None  # reading goes on
        assert metric(srv, "exec_server_audit_refused_total") >= 2
        assert metric(srv, "exec_server_audit_write_errors_total") >= 1
        s.close()
        err = srv.stderr_text()
        assert err.count("audit: cannot write /dev/full: No space left on device") == 1, err
    # Without --audit-required the work goes on, unrecorded and counted.
    with Server(extra_args=["--audit-log", "/dev/full"]) as srv:
        s = srv.session()
        wait_until(lambda: metric(srv, "exec_server_audit_log_writable") == 0,
                   what="the failed write")
        s.start("p", ["/bin/true"])
        assert s.collect_until_closed("p")["exit_code"] == 0
        s.close()


@ours_only
@needs_own_server
def test_reads_and_input_only_when_asked(_):
    work = tempfile.mkdtemp(prefix="audit-")
    try:
        log, rec = os.path.join(work, "audit.log"), os.path.join(work, "rec")
        os.mkdir(rec)
        target = os.path.join(work, "r.txt")
        with open(target, "w") as f:
            f.write("read me")
        with Server(extra_args=["--audit-log", log, "--audit-fs-reads", "--record-dir", rec,
                                "--record-input"]) as srv:
            s = srv.session()
            s.call("fs/readFile", {"path": "file://" + target})
            s.call("fs/readDirectory", {"path": "file://" + work})
            pty = shell_session(s)
            s.close()
        recs = read_log(log)
        rd = only(recs, "fs.read")
        assert rd == dict(rd, path=target, sandboxed=False) and "read me" not in json.dumps(rd)
        assert only(recs, "fs.readDirectory")["path"] == work
        shell = only(recs, "process.start", process="shell")
        typed = ("printf 'h\\303\\251llo \\033[1mbold\\033[0m \\342\\202\\254\\n'\n"
                 "stty size\nexit 0\n")
        check_recording(os.path.join(rec, shell["recording"]), pty, typed=typed)
        assert verify(log).returncode == 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


# What a recorded terminal prints in test_large_recording_is_whole_at_every_point: NUL runs
# (which a terminal does not show: left out of the recording), text, and UTF-8 split across
# writes, then a wait for a line (the recording must already hold all of it), then a little
# more.
BIG_TTY = r"""
import os, sys
out = sys.stdout.buffer
for i in range(64):
    out.write(b"\0" * 16000 + ("line %d caf\u00e9 \u20ac\n" % i).encode() * 300)
    out.write("\u20ac".encode()[:1]); out.flush(); out.write("\u20ac".encode()[1:])
out.write(b"WAITING\n"); out.flush()
sys.stdin.readline()
out.write(b"tail " * 100 + b"END\n"); out.flush()
"""


def recorded_output(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    return "".join(e[2] for e in map(json.loads, lines[1:]) if e[1] == "o").encode()


@ours_only
@needs_own_server
def test_large_recording_is_whole_at_every_point(_):
    """A terminal printing megabytes of NUL runs, text and UTF-8 split across writes (the
    recorder's escapes and its carried sequences, batch after batch): while the command
    waits, the file already holds every byte it printed; at the end the recording, and
    `asciinema cat` of it, give back the client's bytes but the NULs."""
    shown = lambda b: b.replace(b"\0", b"")  # noqa: E731
    work = tempfile.mkdtemp(prefix="audit-")
    try:
        rec = os.path.join(work, "rec")
        os.mkdir(rec)
        with Server(extra_args=["--record-dir", rec]) as srv:
            s = srv.session()
            s.start("big", [sys.executable, "-c", BIG_TTY], tty=True,
                    env={"PATH": PATH_ENV}, size={"rows": 24, "cols": 80})
            pty = lambda: s.output_so_far("big")["pty"]  # noqa: E731
            s.wait_for(lambda: b"WAITING" in pty(), process_id="big", what="the wait")
            [name] = os.listdir(rec)
            path = os.path.join(rec, name)
            so_far = shown(pty())
            wait_until(lambda: recorded_output(path) == so_far, 10,
                       "the recording to hold all the command printed before it waits")
            s.write("big", b"go\n")
            out = s.collect_until_closed("big")
            assert out["exit_code"] == 0, out
        got = out["pty"]
        assert len(got) > 1 << 20 and got.endswith(b"END\r\n"), len(got)
        assert got.count(b"\0") == 64 * 16000, "the client gets every NUL"
        assert recorded_output(path) == shown(got)
        if shutil.which("asciinema"):
            assert asciinema_cat(path) == shown(got)
        print("  %d bytes printed, a %d-byte recording" % (len(got), os.path.getsize(path)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


@ours_only
@needs_own_server
def test_option_rules(_):
    def run(*args):
        return subprocess.run([SERVER_PATH, "--listen", "ws://127.0.0.1:0", *args],
                              capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    for args, want in ((["--audit-required"], "--audit-required requires --audit-log PATH"),
                       (["--audit-fs-reads"], "--audit-fs-reads requires --audit-log PATH"),
                       (["--record-input"], "--record-input requires --record-dir DIR")):
        p = run(*args)
        assert p.returncode == 2 and want in p.stderr, (args, p.returncode, p.stderr)
    p = run("--record-dir", "/nonexistent/recordings")
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "--record-dir /nonexistent/recordings: No such file or directory" in p.stderr
    p = run("--audit-log", "/nonexistent/dir/audit.log")
    assert p.returncode == 1 and "--audit-log /nonexistent/dir/audit.log" in p.stderr, p.stderr
    u = subprocess.run([SERVER_PATH, "audit", "verify"], capture_output=True, text=True)
    assert u.returncode == 2 and "Usage: exec-server audit verify" in u.stderr, u.stderr
    u = subprocess.run([SERVER_PATH, "audit", "verify", "/nonexistent"], capture_output=True,
                       text=True)
    assert u.returncode == 2 and "/nonexistent: No such file" in u.stderr, u.stderr


@ours_only
@needs_own_server
def test_registry_and_relay_login(_):
    """exec-server registry --audit-log: the token commands, a registration and its socket,
    a refused /connect, a harness's connect and the executor's validation of it; the
    executor's own log (EXEC_SERVER_AUDIT_LOG) has the relay login with the same key
    digest and registration, then the session the harness ran a command in."""
    client = remote_testlib.find_build_file("exec-client")
    if not client:
        raise TestSkip("exec-client is not built")
    work = tempfile.mkdtemp(prefix="audit-fleet-")
    reg = ex = None
    try:
        regl, exl = os.path.join(work, "registry.log"), os.path.join(work, "executor.log")
        reg = fleet_lib.Registry(SERVER_PATH, "sqlite:" + os.path.join(work, "fleet.db"),
                                 args=["--audit-log", regl])
        toks = {}
        for role in ("executor", "harness"):
            r = reg.cli("token", "create", "--environment", "aud-1", "--role", role,
                        "--audit-log", regl)
            toks[role] = r.stdout.decode().strip()
        ex = fleet_lib.Executor(SERVER_PATH, reg.url, "aud-1", toks["executor"],
                                extra_env={"EXEC_SERVER_AUDIT_LOG": exl})
        reg.wait_attached("aud-1")
        req = urllib_post(reg.url + "/cloud/environment/aud-1/connect",
                          "exrt_%s_%s" % ("9" * 16, "8" * 64))
        assert req == 401, req
        r = subprocess.run([client, "--remote", reg.url, "--environment-id", "aud-1", "--token",
                            toks["harness"], "run", "echo via-relay"], capture_output=True,
                           timeout=60)
        assert (r.returncode, r.stdout) == (0, b"via-relay\n"), r
        reg.cli("token", "revoke", toks["harness"][5:21], "--audit-log", regl)
        ex.stop()
        ex = None
        reg.stop()
        reg = None
        recs, exrecs = read_log(regl), read_log(exl)
        ids = {k: v[5:21] for k, v in toks.items()}
        created = [(r["action"], r["token"], r.get("role"), r.get("environment"), r.get("expires"))
                   for r in recs if r["type"] == "registry.token"]
        assert created == [("create", ids["executor"], "executor", "aud-1", "never"),
                           ("create", ids["harness"], "harness", "aud-1", "never"),
                           ("revoke", ids["harness"], None, None, None)], created
        regd = only(recs, "registry.register")
        assert regd == dict(regd, environment="aud-1", token=ids["executor"]), regd
        rid = regd["registration"]
        att = only(recs, "registry.attach")
        assert att == dict(att, environment="aud-1", registration=rid), att
        refusal = only(recs, "registry.refusal", what="connect")
        assert refusal == dict(refusal, environment="aud-1", status=401,
                               reason="unknown_token"), refusal
        conn = only(recs, "registry.connect")
        assert conn == dict(conn, environment="aud-1", registration=rid, token=ids["harness"]), conn
        assert re.fullmatch(r"[0-9a-f]{64}", conn["harnessKey"]), conn
        val = only(recs, "registry.validate")
        assert val == dict(val, environment="aud-1", registration=rid, valid=True,
                           harnessKey=conn["harnessKey"], token=ids["executor"]), val
        assert only(recs, "registry.detach")["registration"] == rid
        login = only(exrecs, "login", transport="relay")
        assert login == dict(login, result="ok", registration=rid,
                             harnessKey=conn["harnessKey"]), login
        assert login["peer"].startswith("relay:"), login
        started = only(exrecs, "session.start", peer=login["peer"])
        assert started["transport"] == "relay", started
        run = [r for r in exrecs if r["type"] == "process.start"]
        assert len(run) == 1 and run[0]["session"] == started["session"], run
        assert "echo via-relay" in " ".join(run[0]["argv"]), run
        for f in (regl, exl):
            v = verify(f)
            assert v.returncode == 0 and "the chain holds" in v.stdout, (f, v.stdout)
        raw = open(regl).read() + open(exl).read()
        for t in toks.values():
            assert t not in raw and t[22:] not in raw  # token ids only, never secrets
    finally:
        if ex:
            ex.stop(check=False)
        if reg:
            reg.stop(check=False)
        shutil.rmtree(work, ignore_errors=True)


def urllib_post(url, token):
    """The status of a /connect with token (and a well-formed harness key)."""
    import base64
    import urllib.error
    import urllib.request
    body = json.dumps({"harness_public_key": {
        "suite": "Noise_hybridIK_X25519+MLKEM768_AESGCM_SHA256",
        "x25519_public_key": base64.b64encode(os.urandom(32)).decode(),
        "mlkem768_public_key": base64.b64encode(os.urandom(1184)).decode()}}).encode()
    req = urllib.request.Request(url, data=body, method="POST")
    req.add_header("content-type", "application/json")
    req.add_header("authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


if __name__ == "__main__":
    run_tests(globals())
