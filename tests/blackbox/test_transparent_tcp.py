#!/usr/bin/env python3
"""Transparent TCP (issue 35; PROTOCOL.md 5.11, docs/FLAGS.md): a sandboxed program that
ignores every proxy variable still has each TCP connection decided by the managed-network
policy. Every test runs against ours and, when it is installed, the codex 0.171.0
reference (tests/blackbox/codex_ref.py), side by side, and judges what a user notices: what the child
read (tests/blackbox/tcp_probe.py prints it), what reached a server on this host, the
network/policyDecision and network/policyRequest messages.

The reference needs a bubblewrap on PATH for transparent TCP, outside any root its sandbox
may write: Debian's (deps/debian-packages.txt), else its bundled one (codex-resources/bwrap)
where the cache is not under the temporary directory (a HOME made by mktemp). Tests that need a sandbox with a TUN device skip
with a message where /dev/net/tun is missing; the reference's part skips where it has no
bubblewrap. Names: a child resolves through the synthetic resolver, so a name must mean
something on the host's side only: ours resolves the test names with
EXEC_SERVER_TEST_RESOLVE; for the reference, two aliases of 127.0.0.1 in /etc/hosts stand
in (written with a final dot in the child, which the sandbox's /etc/hosts does not match),
and the by-name parts skip without them."""
import glob
import hashlib
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ["EXEC_SERVER_TEST_RESOLVE"] = "tt-a.test=127.0.0.1,tt-b.test=127.0.0.1," \
    "tt-c.test=127.0.0.1,tt-d.test=127.0.0.1"
from harness import *  # noqa
import codex_ref  # noqa: E402

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tcp_probe.py")
HAVE_TUN = os.path.exists("/dev/net/tun")


def find_reference_171():
    """The 0.171.0 reference (codex_ref: the ctest fixture installs it), or None."""
    try:
        return codex_ref.require("0.171.0")
    except codex_ref.Unavailable as e:
        print("note: %s" % e)
        return None


REF = find_reference_171()
BWRAP = shutil.which("bwrap")
if REF and not BWRAP:
    # its own: the directory it ships (not under /tmp: its launcher refuses a bubblewrap
    # in a root the sandbox may write, "transparent TCP requires a supported distro
    # bubblewrap on PATH")
    bundled = os.path.join(os.path.dirname(os.path.dirname(REF)), "codex-resources")
    if os.access(os.path.join(bundled, "bwrap"), os.X_OK) and not codex_ref.in_temp_dir(
            bundled):
        os.environ["PATH"] = bundled + ":" + os.environ["PATH"]
        BWRAP = os.path.join(bundled, "bwrap")


def host_address():
    """This host's address on its default route, or None (then the by-address parts
    skip): what a sandboxed child reaches through its TUN device. 192.0.2.1 is the
    child's own address inside."""
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect(("198.51.100.1", 9))
        a = s.getsockname()[0]
        s.close()
    except OSError:
        return None
    return None if a.startswith("127.") or a == "192.0.2.1" else a


HOST = host_address()


def aliases():
    names = []
    try:
        for line in open("/etc/hosts"):
            parts = line.split("#", 1)[0].split()
            if len(parts) >= 2 and parts[0] == "127.0.0.1":
                names += [n for n in parts[1:] if n != "localhost" and "." not in n]
    except OSError:
        pass
    return sorted(set(names))


class Recorder(BaseHTTPRequestHandler):
    """The internet's stand-in, on every address of this host."""
    protocol_version = "HTTP/1.1"
    got = []

    def do_GET(self):
        Recorder.got.append(self.path)
        out = b"hello from " + self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


_httpd = ThreadingHTTPServer(("0.0.0.0", 0), Recorder)
threading.Thread(target=_httpd.serve_forever, daemon=True).start()
PORT = _httpd.server_address[1]


def servers(need_sandbox):
    """(label, command, is_reference) of each server to run: ours, then the 0.171.0
    reference when it is installed (and, for a sandbox, has bubblewrap)."""
    out = [("ours", WRAPPER + [SERVER_PATH], False)]
    if REF and (BWRAP or not need_sandbox):
        out.append(("0.171.0", [REF, "exec-server"], True))
    elif REF:
        print("  (the reference's part skipped: no bubblewrap for it)")
    if not REF:
        print("  (no 0.171.0 reference installed: ours alone)")
    print("  against: " + ", ".join(label for label, _, _ in out))
    return out


def start(cmd, is_ref, extra=()):
    return Server(cmd=cmd + ["--listen", "ws://127.0.0.1:0"] + list(extra), reference=is_ref)


def names_for(is_ref, n):
    """n names that reach 127.0.0.1 on the host, as the child writes them; None when the
    server cannot have them (the reference without /etc/hosts aliases)."""
    if not is_ref:
        return ["tt-a.test", "tt-b.test", "tt-c.test", "tt-d.test"][:n]
    al = aliases()
    return [a + "." for a in al[:n]] if len(al) >= n else None


def bare(name):
    return name.rstrip(".")


def sandbox(ws, net="restricted"):
    def ent(kind, access):
        return {"path": {"type": "special", "value": {"kind": kind}}, "access": access}
    return {"permissions": {"type": "managed", "file_system": {
        "type": "restricted", "entries": [ent("root", "read"), ent("project_roots", "write")]},
        "network": net}, "cwd": "file://" + ws, "workspaceRoots": ["file://" + ws],
        "windowsSandboxLevel": "disabled"}


def network_proxy(domains, socks=True, timeout=None, **kw):
    p = {"enabled": True, "enableSocks5": socks, "enableSocks5Udp": False,
         "allowUpstreamProxy": False, "dangerouslyAllowAllUnixSockets": False, "mode": "full",
         "domains": domains, "unixSockets": None, "allowLocalBinding": True}
    p.update(kw)
    out = {"proxy": p}
    if timeout is not None:
        out["policyDecisionTimeoutMs"] = timeout
    return out


def run_probe(s, pid, spec, np, answer=None, transparent=True, sandboxed=True, enforce=True,
              ws=None, argv=None):
    """Starts the probe (or argv) in a sandbox; answers policy requests with answer(msg)
    (also those that come before the start's reply: the proxy may decide a connection
    before the spawner reports the start); returns (its JSON or None, summary,
    decisions, requests)."""
    if transparent:
        np["proxy"]["transparentTcp"] = True
    params = {"processId": pid, "argv": argv or [sys.executable, PROBE, json.dumps(spec)],
              "cwd": "file://" + (ws or "/tmp"), "env": {"PATH": os.environ["PATH"]},
              "tty": False, "networkProxy": np}
    if sandboxed:
        params.update(sandbox=sandbox(ws), enforceManagedNetwork=enforce)
    rid = s.send_request("process/start", params)
    requests = []
    deadline = time.monotonic() + DEFAULT_TIMEOUT * 4
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            s.fail("process %s did not close" % pid)
        try:
            m = s.pump(left)
        except Timeout:
            continue
        if m is None:
            s.fail("connection closed while running %s" % pid)
        if m.get("method") == "network/policyRequest":
            requests.append(m["params"])
            if answer:
                s.send_obj(answer(m))
        elif m.get("method") in ("process/closed", "process/exited") and \
                {"process/closed", "process/exited"} <= \
                {n["method"] for n in s.notes.get(pid, [])}:
            break  # the reference may send exited after closed: both
        elif m.get("id") == rid and "error" in m:
            s.fail("process/start failed: %s" % m["error"])
    notes = s.notes.get(pid, [])
    decisions = [dict((k, v) for k, v in n.items() if k != "method") for n in notes
                 if n["method"] == "network/policyDecision"]
    out = summarize([n for n in notes if n["method"].startswith("process/")])
    text = out["stdout"].decode().strip()
    return (json.loads(text) if text and argv is None else None), out, decisions, requests


def need_tun():
    if not HAVE_TUN:
        raise TestSkip("no /dev/net/tun on this host")


def workspace():
    return tempfile.mkdtemp(prefix="tt-ws-")


# ---------------------------------------------------------------------------------------

@needs_own_server
def test_transparent_tcp_param_errors(_):
    """proxy.transparentTcp's -32602 texts and order, the same on both servers (verified
    on 0.171.0): no sandbox; SOCKS5 off; null and a string; false needs nothing."""
    ws = workspace()
    cases = [
        (network_proxy({}, transparentTcp=True), False,
         "transparent TCP requires a managed Linux sandbox"),
        (network_proxy({}, socks=False, transparentTcp=True), True,
         "invalid network proxy config: transparent_tcp requires an enabled managed SOCKS5 "
         "proxy"),
        (network_proxy({}, socks=False, transparentTcp=True), False,
         "transparent TCP requires a managed Linux sandbox"),
        (network_proxy({}, enabled=False, transparentTcp=True), False,
         "transparent TCP requires a managed Linux sandbox"),
        (network_proxy({}, transparentTcp=None), False, "invalid type: null, expected a boolean"),
        (network_proxy({}, transparentTcp="yes"), False,
         'invalid type: string "yes", expected a boolean'),
        (network_proxy({}, transparentTcp=1), False, "invalid type: number, expected a boolean"),
    ]
    for label, cmd, is_ref in servers(need_sandbox=False):
        with start(cmd, is_ref) as srv:
            s = srv.session()
            for i, (np, sbx, want) in enumerate(cases):
                p = {"processId": "e%d" % i, "argv": ["/bin/true"], "cwd": "file://" + ws,
                     "env": {"PATH": "/usr/bin:/bin"}, "tty": False, "networkProxy": np}
                if sbx:
                    p["sandbox"] = sandbox(ws)
                r = s.request("process/start", p)
                assert r.get("error") == {"code": -32602, "message": want}, (label, np, r)
            p = {"processId": "ok", "argv": ["/bin/true"], "cwd": "file://" + ws,
                 "env": {"PATH": "/usr/bin:/bin"}, "tty": False,
                 "networkProxy": network_proxy({}, transparentTcp=False)}
            assert s.call("process/start", p)["processId"] == "ok", label
            s.close()
    shutil.rmtree(ws, ignore_errors=True)


@needs_own_server
def test_view_inside_the_sandbox(_):
    """What the child sees: codextun with 192.0.2.1/32 and 2001:db8::1/128, MTU 1500, up;
    the default routes through it; resolv.conf naming 127.0.0.53 (read-only); the host's
    /etc/hosts; the resolver numbering names from 1 over UDP and TCP."""
    need_tun()
    hosts = open("/etc/hosts").read()
    for label, cmd, is_ref in servers(need_sandbox=True):
        ws = workspace()
        with start(cmd, is_ref) as srv:
            s = srv.session()
            out, summary, _, _ = run_probe(
                s, "v1", {"view": True, "dns": ["one.test", "Two.Test", "one.test.+tcp"]},
                network_proxy({}), ws=ws)
            assert summary["exit_code"] == 0, (label, summary)
            v = out["view"]
            assert v["resolv"] == "nameserver 127.0.0.53\n", (label, v)
            assert v["hosts"] == hosts, (label, v["hosts"])
            assert v.get("addr4") == "192.0.2.1" and v.get("mtu") == 1500, (label, v)
            assert v["flags"] & 1 and v["flags"] & 0x10, (label, v)  # UP, POINTOPOINT
            assert "20010db8000000000000000000000001 02 80" in v["if_inet6"], (label, v)
            assert any(l.split()[:2] == ["codextun", "00000000"]
                       for l in v["route"].splitlines()), (label, v["route"])
            assert any(l.startswith("0" * 32 + " 00 ") and l.split()[-1] == "codextun"
                       for l in v["ipv6_route"].splitlines()), (label, v["ipv6_route"])
            assert out["dns"] == {"one.test": ["198.18.0.1", "fdc0:de00::1"],
                                  "Two.Test": ["198.18.0.2", "fdc0:de00::2"],
                                  "one.test.+tcp": ["198.18.0.1", "fdc0:de00::1"]}, (label, out)
            s.close()
        shutil.rmtree(ws, ignore_errors=True)


@needs_own_server
def test_allow_deny_by_address_and_name(_):
    """No proxy variables used: an allow-listed host by address and by name (over IPv4
    and, forced, IPv6: fdc0:de00::N) is reached, a
    deny-listed name is not (the server on this host gets nothing from it) while the
    positive control in the same child gets through; each connection is decided and
    reported as a SOCKS5 CONNECT would be."""
    need_tun()
    for label, cmd, is_ref in servers(need_sandbox=True):
        names = names_for(is_ref, 2)
        if not names and not HOST:
            print("  %s: skipped (no host address and no names)" % label)
            continue
        ws = workspace()
        tag = "%s-%d" % (label, time.monotonic_ns())
        domains, targets = {}, []
        if HOST:
            domains[HOST] = "allow"
            targets.append([HOST, PORT, "/addr-" + tag])
        if names:
            domains[bare(names[0])] = "allow"
            domains[bare(names[1])] = "deny"
            targets += [[names[0], PORT, "/name6-" + tag, 6], [names[0], PORT, "/name-" + tag],
                        [names[1], PORT, "/denied-" + tag]]
        with start(cmd, is_ref) as srv:
            s = srv.session()
            out, summary, dec, _ = run_probe(s, "a1", {"connect": targets}, network_proxy(domains),
                                             ws=ws)
            assert summary["exit_code"] == 0, (label, summary)
            res = out["connect"]
            if HOST:
                assert res[0] == {"status": 200, "body": "hello from /addr-" + tag}, (label, res)
                assert "/addr-" + tag in Recorder.got, label
            if names:
                assert res[-3] == {"status": 200, "body": "hello from /name6-" + tag}, (label, res)
                assert res[-2] == {"status": 200, "body": "hello from /name-" + tag}, (label, res)
                assert "error" in res[-1], (label, res)
                assert "/name-" + tag in Recorder.got and "/denied-" + tag not in Recorder.got
            for d in dec:
                assert d["protocol"] == "socks5_tcp" and d["port"] == PORT, (label, d)
                assert d["client"].startswith("127.0.0.1:") and "method" not in d, (label, d)
                assert list(d) == ["processId", "timestamp", "scope", "decision", "source",
                                   "reason", "protocol", "host", "port", "client",
                                   "policyOverride"], (label, d)
            seen = {(d["host"], d["decision"], d["reason"]) for d in dec}
            if HOST:
                assert (HOST, "allow", "allow") in seen, (label, dec)
            if names:
                assert (bare(names[0]), "allow", "allow") in seen, (label, dec)
                assert (bare(names[1]), "deny", "denied") in seen, (label, dec)
            s.close()
        shutil.rmtree(ws, ignore_errors=True)


@needs_own_server
def test_undecided_name_is_asked(_):
    """A name no entry decides goes to the client's decider (network/policyRequest, as for
    SOCKS5): allowed, the child gets its answer; denied, it does not and nothing reaches
    the host."""
    need_tun()
    for label, cmd, is_ref in servers(need_sandbox=True):
        names = names_for(is_ref, 2)
        if not names:
            print("  %s: skipped (no names for it)" % label)
            continue
        ws = workspace()
        tag = "%s-%d" % (label, time.monotonic_ns())

        def answer(m):
            host = m["params"]["request"]["host"]
            kind = "allow" if host == bare(names[0]) else "deny"
            dec = {"type": kind} if kind == "allow" else {"type": "deny", "reason": "no"}
            return {"id": m["id"], "result": {"decision": dec}}
        with start(cmd, is_ref) as srv:
            s = srv.session()
            out, summary, dec, req = run_probe(
                s, "q1", {"connect": [[names[0], PORT, "/asked-" + tag],
                                      [names[1], PORT, "/refused-" + tag]]},
                network_proxy({}, timeout=5000), answer=answer, ws=ws)
            res = out["connect"]
            assert res[0] == {"status": 200, "body": "hello from /asked-" + tag}, (label, res)
            assert "error" in res[1], (label, res)
            assert "/refused-" + tag not in Recorder.got, label
            hosts = {r["request"]["host"] for r in req}
            assert hosts == {bare(names[0]), bare(names[1])}, (label, req)
            for r in req:
                assert r["processId"] == "q1" and r["request"]["protocol"] == "socks5_tcp", r
                assert r["request"]["port"] == PORT, (label, r)
            allowed = [d for d in dec if d["host"] == bare(names[0])]
            assert allowed and allowed[0]["source"] == "decider", (label, dec)
            assert allowed[0]["policyOverride"] is True, (label, dec)
            s.close()
        shutil.rmtree(ws, ignore_errors=True)


@needs_own_server
def test_udp_goes_nowhere(_):
    """UDP to anywhere but the resolver leaves nothing on the host, while the same child's
    resolver query is answered (the positive control)."""
    need_tun()
    if not HOST:
        raise TestSkip("no host address other than loopback to send to")
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("0.0.0.0", 0))
    uport = u.getsockname()[1]
    u.settimeout(0.1)
    for label, cmd, is_ref in servers(need_sandbox=True):
        ws = workspace()
        with start(cmd, is_ref) as srv:
            s = srv.session()
            out, summary, _, _ = run_probe(
                s, "u1", {"udp": [[HOST, uport, "leak-4"], ["2001:db8::99", uport, "leak-6"]],
                          "dns": ["udp-control.test"]}, network_proxy({HOST: "allow"}), ws=ws)
            assert summary["exit_code"] == 0 and out["udp"] == 2, (label, summary)
            assert out["dns"]["udp-control.test"][0] == "198.18.0.1", (label, out)
            got = []
            end = time.monotonic() + 1.0  # sleep-ok: a window in which nothing may arrive
            while time.monotonic() < end:
                try:
                    got.append(u.recvfrom(2048)[0])
                except socket.timeout:
                    pass
            assert got == [], (label, got)
            s.close()
        shutil.rmtree(ws, ignore_errors=True)


@needs_own_server
def test_unassigned_synthetic_address(_):
    """A synthetic address no name was given is reset and decided on nothing."""
    need_tun()
    for label, cmd, is_ref in servers(need_sandbox=True):
        ws = workspace()
        with start(cmd, is_ref) as srv:
            s = srv.session()
            out, _, dec, _ = run_probe(s, "s1", {"connect": [["198.18.0.200", PORT, "/syn"],
                                                             ["fdc0:de00::99", PORT, "/syn6"]]},
                                       network_proxy({"*": "allow"}), ws=ws)
            assert all("error" in r for r in out["connect"]), (label, out)
            assert dec == [], (label, dec)
            s.close()
        shutil.rmtree(ws, ignore_errors=True)


class ConnectProxy:
    """A logging HTTP CONNECT proxy (--tcp-upstream-proxy): records each request head,
    then connects every name to 127.0.0.1 itself (refuse: answers 403 to all)."""

    def __init__(self, refuse=False):
        self.refuse = refuse
        self.heads = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            c, _ = self.sock.accept()
            threading.Thread(target=self.handle, args=(c,), daemon=True).start()

    @staticmethod
    def pipe(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def handle(self, c):
        head = b""
        while b"\r\n\r\n" not in head:
            d = c.recv(1)
            if not d:
                return
            head += d
        self.heads.append(head.decode("latin-1"))
        if self.refuse:
            c.sendall(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n")
            c.close()
            return
        port = int(head.split(b" ")[1].rsplit(b":", 1)[1])
        u = socket.create_connection(("127.0.0.1", port), timeout=10)
        c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        threading.Thread(target=self.pipe, args=(u, c), daemon=True).start()
        self.pipe(c, u)


@needs_own_server
def test_tcp_upstream_proxy(_):
    """--tcp-upstream-proxy: a SOCKS5 connection (and a transparent one) leaves as
    `CONNECT name:port` through the logging proxy, the name unresolved; without
    allowUpstreamProxy, or through a refusing proxy, the child gets an error and the host
    nothing: never a direct connection."""
    client = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netproxy_client.py")
    name = "only-upstream.test"  # resolved by the proxy alone
    for label, cmd, is_ref in servers(need_sandbox=False):
        ok, refusing = ConnectProxy(), ConnectProxy(refuse=True)
        tag = "%s-%d" % (label, time.monotonic_ns())
        for proxy, allow_up, want_ok in ((ok, True, True), (ok, False, False),
                                         (refusing, True, False)):
            with start(cmd, is_ref, ["--tcp-upstream-proxy", "127.0.0.1:%d" % proxy.port]) as srv:
                s = srv.session()
                before = len(proxy.heads)
                path = "/up-%s-%s-%s" % (tag, allow_up, proxy.refuse)
                np = network_proxy({name: "allow"}, allowUpstreamProxy=allow_up)
                _, summary, dec, _ = run_probe(
                    s, "t1", None, np, transparent=False, sandboxed=False,
                    argv=[sys.executable, client,
                          json.dumps({"mode": "socks", "host": name, "port": PORT, "path": path})])
                r = json.loads(summary["stdout"].decode())
                if want_ok:
                    assert r["rep"] == 0 and r["body"] == "hello from " + path, (label, r)
                    assert proxy.heads[before] == "CONNECT %s:%d HTTP/1.1\r\nhost: %s:%d\r\n\r\n" % (
                        name, PORT, name, PORT), (label, proxy.heads[before:])
                else:
                    assert r["rep"] != 0 and path not in Recorder.got, (label, r)
                    assert len(proxy.heads) == before + (1 if proxy.refuse else 0), label
                assert dec and dec[0]["decision"] == "allow", (label, dec)
                s.close()
        if not HAVE_TUN or (is_ref and not BWRAP):
            continue
        ws = workspace()
        with start(cmd, is_ref, ["--tcp-upstream-proxy", "127.0.0.1:%d" % ok.port]) as srv:
            s = srv.session()
            before = len(ok.heads)
            out, _, _, _ = run_probe(s, "t2", {"connect": [[name + ".", PORT, "/tt-" + tag]]},
                                     network_proxy({name: "allow"}, allowUpstreamProxy=True),
                                     ws=ws)
            assert out["connect"][0] == {"status": 200, "body": "hello from /tt-" + tag}, \
                (label, out)
            assert ok.heads[before].startswith("CONNECT %s:%d HTTP/1.1\r\n" % (name, PORT)), \
                (label, ok.heads[before:])
            s.close()
        shutil.rmtree(ws, ignore_errors=True)


@needs_own_server
def test_flag_turns_it_on(_):
    """--linux-sandbox-transparent-tcp: a sandboxed start with enforceManagedNetwork gets
    transparent TCP without asking (even transparentTcp false); with SOCKS5 off the
    command does not run (exit 101, the reference's words)."""
    need_tun()
    for label, cmd, is_ref in servers(need_sandbox=True):
        ws = workspace()
        with start(cmd, is_ref, ["--linux-sandbox-transparent-tcp"]) as srv:
            s = srv.session()
            out, summary, _, _ = run_probe(s, "f1", {"view": True}, network_proxy({}),
                                           transparent=False, ws=ws)
            assert out["view"]["resolv"] == "nameserver 127.0.0.53\n", (label, out)
            np = network_proxy({}, transparentTcp=False)
            out, summary, _, _ = run_probe(s, "f2", {"view": True}, np, transparent=False, ws=ws)
            assert out["view"]["resolv"] == "nameserver 127.0.0.53\n", (label, out)
            _, summary, _, _ = run_probe(s, "f3", None, network_proxy({}, socks=False),
                                         transparent=False, ws=ws,
                                         argv=["/bin/sh", "-c", "echo ran"])
            assert summary["exit_code"] == 101 and b"ran" not in summary["stdout"], (label, summary)
            assert b"failed to prepare transparent TCP: transparent TCP requires managed SOCKS5" \
                in summary["stderr"], (label, summary)
            s.close()
        shutil.rmtree(ws, ignore_errors=True)


class Bulk:
    """A TCP service on this host: `get N` sends N bytes (a fixed pattern), `put N` reads
    N bytes and answers their SHA-256."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    @staticmethod
    def pattern(n):
        block = bytes(range(256)) * 256
        return (block * (n // len(block) + 1))[:n]

    def serve(self):
        while True:
            c, _ = self.sock.accept()
            threading.Thread(target=self.handle, args=(c,), daemon=True).start()

    def handle(self, c):
        f = c.makefile("rb")
        cmd, n = f.readline().split()
        n = int(n)
        if cmd == b"get":
            c.sendall(self.pattern(n))
        else:
            h, left = hashlib.sha256(), n
            while left:
                d = f.read(min(left, 65536))
                if not d:
                    break
                h.update(d)
                left -= len(d)
            c.sendall(h.hexdigest().encode())
        c.close()


@needs_own_server
def test_bulk_both_ways(_):
    """16 MiB each way through one sandbox's TUN device arrive whole and in order, down
    over IPv6 and up over IPv4 (segmentation offload, checksums and flow control on both
    sides of the stack)."""
    need_tun()
    bulk = Bulk()
    n = 16 << 20
    want = hashlib.sha256(Bulk.pattern(n)).hexdigest()
    for label, cmd, is_ref in servers(need_sandbox=True):
        names = names_for(is_ref, 1)
        if not names:
            print("  %s: skipped (no name for it)" % label)
            continue
        ws = workspace()
        script = ("import hashlib,socket\n"
                  "def conn(fam):\n"
                  "  a=socket.getaddrinfo(%r,%d,fam,socket.SOCK_STREAM)[0][4]\n"
                  "  s=socket.socket(fam,socket.SOCK_STREAM); s.settimeout(60); s.connect(a)\n"
                  "  return s\n"
                  "s=conn(socket.AF_INET6); s.sendall(b'get %d\\n'); h=hashlib.sha256(); got=0\n"
                  "while True:\n"
                  "  d=s.recv(1<<20)\n"
                  "  if not d: break\n"
                  "  h.update(d); got+=len(d)\n"
                  "block=bytes(range(256))*256\n"
                  "data=(block*(%d//len(block)+1))[:%d]\n"
                  "u=conn(socket.AF_INET); u.sendall(b'put %d\\n'+data); up=u.recv(100).decode()\n"
                  "print(got, h.hexdigest(), up)\n") % (names[0], bulk.port, n, n, n, n)
        with start(cmd, is_ref) as srv:
            s = srv.session()
            _, summary, _, _ = run_probe(s, "b1", None, network_proxy({bare(names[0]): "allow"}),
                                         ws=ws, argv=[sys.executable, "-c", script])
            assert summary["exit_code"] == 0, (label, summary)
            assert summary["stdout"].decode().split() == [str(n), want, want], (label, summary)
            s.close()
        shutil.rmtree(ws, ignore_errors=True)


@ours_only
@needs_own_server
def test_many_connections_and_nothing_left(_):
    """Ours: 200 connections one after another and 40 at once through one sandbox all get
    their answer, and once the process has closed the server holds no more descriptors
    than before it (the TUN device and the resolver's sockets are let go)."""
    need_tun()
    ws = workspace()
    with start(WRAPPER + [SERVER_PATH], False) as srv:
        s = srv.session()
        base = fd_count(srv.pid)
        script = ("import json,socket,sys,threading\n"
                  "def get(p):\n"
                  "  s=socket.create_connection(('tt-a.test',%d),timeout=20)\n"
                  "  s.sendall(b'GET '+p.encode()+b' HTTP/1.1\\r\\nHost: x\\r\\n"
                  "Connection: close\\r\\n\\r\\n')\n"
                  "  d=b''\n"
                  "  while True:\n"
                  "    c=s.recv(65536)\n"
                  "    if not c: break\n"
                  "    d+=c\n"
                  "  return d.endswith(p.encode())\n"
                  "seq=sum(get('/seq%%d'%%i) for i in range(200))\n"
                  "res=[]\n"
                  "ts=[threading.Thread(target=lambda i=i: res.append(get('/par%%d'%%i)))"
                  " for i in range(40)]\n"
                  "[t.start() for t in ts]; [t.join() for t in ts]\n"
                  "print(json.dumps([seq, sum(res)]))\n") % PORT
        _, summary, dec, _ = run_probe(s, "m1", None, network_proxy({"tt-a.test": "allow"}),
                                       ws=ws, argv=[sys.executable, "-c", script])
        assert summary["exit_code"] == 0, summary
        assert json.loads(summary["stdout"].decode()) == [200, 40], summary
        wait_until(lambda: fd_count(srv.pid) <= base, DEFAULT_TIMEOUT,
                   "the server to let go of the sandbox's descriptors")
        s.close()
    shutil.rmtree(ws, ignore_errors=True)


if __name__ == "__main__":
    run_tests(globals(), per_test_timeout=int(300 * TIMEOUT_SCALE))
