#!/usr/bin/env python3
"""The managed-network proxy (PROTOCOL.md §5.10): process/start with `networkProxy` runs
the child behind a policy proxy inside the server. Local HTTP servers on 127.0.0.1 stand in
for the internet; each behaviour is judged by what the local server received and what the
child (tests/blackbox/netproxy_client.py) read back.

Names: against ours the server is started with EXEC_SERVER_TEST_RESOLVE (the proxy's
test-only resolver override, src/netproxy/netproxy.h) mapping np-a.test and np-b.test to
127.0.0.1. Against the reference (EXEC_SERVER=ref) two aliases of 127.0.0.1 from
/etc/hosts play those parts, and the tests that need them skip when there are none."""
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ["EXEC_SERVER_TEST_RESOLVE"] = \
    "np-a.test=127.0.0.1,np-b.test=127.0.0.1,api.github.com=127.0.0.1," \
    "public.test=192.88.99.1,private.test=10.9.9.9"
# Credential masking: a test CA the server trusts for its upstream TLS (SSL_CERT_FILE) and a
# CODEX_HOME of its own for the interception CA it makes.
CERTS = tempfile.mkdtemp(prefix="np-certs-")
import atexit  # noqa: E402
atexit.register(shutil.rmtree, CERTS, True)


def make_certs():
    if not shutil.which("openssl"):
        return False
    ext = os.path.join(CERTS, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:np-a.test,DNS:api.github.com\nbasicConstraints=CA:FALSE\n"
                "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
                "authorityKeyIdentifier=keyid\n")
    run = lambda *a: subprocess.run(["openssl"] + list(a), cwd=CERTS, check=True,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj",
        "/CN=np-test-ca", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
        "keyUsage=critical,keyCertSign,cRLSign")
    run("req", *ec, "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=np-a.test")
    run("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "leaf.pem", "-days", "2", "-extfile", ext)
    return True


HAVE_CERTS = make_certs()
if HAVE_CERTS:
    os.environ["SSL_CERT_FILE"] = os.path.join(CERTS, "ca.pem")
os.environ["CODEX_HOME"] = os.path.join(CERTS, "codex-home")
from harness import *  # noqa

CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netproxy_client.py")


def loopback_aliases():
    names = []
    try:
        with open("/etc/hosts") as f:
            for line in f:
                parts = line.split("#", 1)[0].split()
                if len(parts) >= 2 and parts[0] == "127.0.0.1":
                    names += [n for n in parts[1:] if n != "localhost" and "." not in n]
    except OSError:
        pass
    return sorted(set(names))


if IS_REF:
    _aliases = loopback_aliases()
    HOST_A, HOST_B = (_aliases + [None, None])[:2]
else:
    HOST_A, HOST_B = "np-a.test", "np-b.test"


def need_names():
    if not HOST_B:
        raise TestSkip("no second name for 127.0.0.1 (the reference has no resolver override)")


class Recorder(BaseHTTPRequestHandler):
    """The stand-in for the internet: records every request it gets."""
    protocol_version = "HTTP/1.1"
    got = []

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        Recorder.got.append({"method": self.command, "path": self.path,
                             "headers": {k.lower(): v for k, v in self.headers.items()},
                             "body": body.decode("latin-1")})
        out = b"hello from " + self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)

    do_GET = do_POST = do_HEAD = do_OPTIONS = do_PUT = handle_any

    def log_message(self, *a):
        pass


_httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
threading.Thread(target=_httpd.serve_forever, daemon=True).start()
PORT = _httpd.server_address[1]
HTTPS_PORT = None
if HAVE_CERTS:
    _httpsd = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    _ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _ctx.load_cert_chain(os.path.join(CERTS, "leaf.pem"), os.path.join(CERTS, "leaf.key"))
    _httpsd.socket = _ctx.wrap_socket(_httpsd.socket, server_side=True)
    threading.Thread(target=_httpsd.serve_forever, daemon=True).start()
    HTTPS_PORT = _httpsd.server_address[1]


def received(path):
    return [g for g in Recorder.got if g["path"] == path]


def netproxy(domains, mode="full", local=True, socks=False, timeout=None, **proxy):
    p = {"enabled": True, "enableSocks5": socks, "enableSocks5Udp": False,
         "allowUpstreamProxy": False, "dangerouslyAllowAllUnixSockets": False, "mode": mode,
         "domains": domains, "unixSockets": None, "allowLocalBinding": local}
    p.update(proxy)
    out = {"proxy": p}
    if timeout is not None:
        out["policyDecisionTimeoutMs"] = timeout
    return out


def allow(m):
    return {"id": m["id"], "result": {"decision": {"type": "allow"}}}


def run_child(rpc, pid, spec, np, answer=None, env=None, extra=None):
    """Starts the client child behind the proxy; answers policy requests with answer(msg)
    (None: no answer); returns (result dict, decisions, policy requests).

    The child may reach the proxy before process/start's reply has come (the server
    replies when the spawner reports; on a loaded machine the child runs first): its
    policy requests and decisions are read here, in arrival order, with the reply."""
    e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    e.update(env or {})
    params = dict(extra or {})
    params["networkProxy"] = np
    start = rpc.start(pid, [sys.executable, CLIENT, json.dumps(spec)], env=e, wait=False,
                      **params)
    decisions, requests = [], []
    deadline = time.monotonic() + DEFAULT_TIMEOUT * 2
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            rpc.fail("process %s did not close" % pid)
        try:
            m = rpc.pump(left)
        except Timeout:
            continue
        if m is None:
            rpc.fail("connection closed while running %s" % pid)
        meth = m.get("method")
        if meth is None and m.get("id") == start and "error" in m:
            rpc.fail("process/start %s failed" % pid)
        if meth == "network/policyRequest":
            requests.append(m)
            if answer:
                reply = answer(m)
                if reply is not None:
                    rpc.send_obj(reply)
        elif meth == "network/policyDecision" and m["params"]["processId"] == pid:
            decisions.append(m["params"])
        elif meth == "process/closed" and m["params"]["processId"] == pid:
            break
    assert "result" in rpc.wait_response(start), pid  # came before process/closed
    out = summarize(rpc.notes.get(pid, []))
    assert out["exit_code"] == 0, (out, decisions)
    text = out["stdout"].decode().strip()
    return (json.loads(text) if text else {}), decisions, requests


def wait_request(rpc, pid):
    """The next network/policyRequest for pid, whole (the harness files its params only);
    pid started with wait=False, as the request may come before the reply (run_child)."""
    while True:
        m = rpc.pump(DEFAULT_TIMEOUT)
        if m is None:
            rpc.fail("connection closed before a policy request")
        if m.get("method") == "network/policyRequest" and m["params"]["processId"] == pid:
            return m


def url(host, path):
    return "http://%s:%d%s" % (host, PORT, path)


def check_decision(d, pid, decision, source, reason, protocol="http", host=None, method="GET",
                   override=False, scope="domain"):
    assert d["processId"] == pid and d["decision"] == decision and d["source"] == source, d
    assert d["reason"] == reason and d["protocol"] == protocol and d["scope"] == scope, d
    assert d["port"] == PORT and d["policyOverride"] is override, d
    assert d["client"].startswith("127.0.0.1:"), d
    assert (d.get("method") == method) if method else "method" not in d, d
    if host:
        assert d["host"] == host, d
    assert list(d) == ["processId", "timestamp", "scope", "decision", "source", "reason",
                       "protocol", "host", "port"] + (["method"] if method else []) + \
        ["client", "policyOverride"], list(d)


# ---------------------------------------------------------------------------------------

def test_capabilities(srv):
    s = srv.session()
    caps = s.call("environment/info", {})["capabilities"]
    assert caps["networkProxyLaunch"] is True and caps["networkProxyReviewDomains"] is True, caps
    s.close()


def test_child_environment(srv):
    """§5.10's variable list, exactly; the client's own proxy variables are replaced; each
    process gets its own ports."""
    s = srv.session()
    env, _, _ = run_child(s, "e1", {"mode": "env"}, netproxy({"x.test": "allow"}, socks=True),
                          env={"HTTP_PROXY": "http://mine:1", "NO_PROXY": "a.com", "KEEP": "1"})
    http = env["HTTP_PROXY"]
    assert http.startswith("http://127.0.0.1:") and http != "http://mine:1", env
    socks = env["ALL_PROXY"]
    assert socks.startswith("socks5h://127.0.0.1:") and socks.split(":")[-1] != http.split(":")[-1]
    local = "localhost,127.0.0.1,::1,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16"
    want = {v: http for v in (
        "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "WS_PROXY", "WSS_PROXY",
        "ws_proxy", "wss_proxy", "YARN_HTTP_PROXY", "YARN_HTTPS_PROXY", "npm_config_http_proxy",
        "npm_config_https_proxy", "npm_config_proxy", "NPM_CONFIG_HTTP_PROXY",
        "NPM_CONFIG_HTTPS_PROXY", "NPM_CONFIG_PROXY", "BUNDLE_HTTP_PROXY", "BUNDLE_HTTPS_PROXY",
        "PIP_PROXY", "DOCKER_HTTP_PROXY", "DOCKER_HTTPS_PROXY")}
    want.update({v: socks for v in ("ALL_PROXY", "all_proxy", "FTP_PROXY", "ftp_proxy")})
    want.update({v: local for v in ("NO_PROXY", "no_proxy", "npm_config_noproxy",
                                    "NPM_CONFIG_NOPROXY", "BUNDLE_NO_PROXY")})
    want.update({"NODE_USE_ENV_PROXY": "1", "ELECTRON_GET_USE_PROXY": "true",
                 "CODEX_NETWORK_PROXY_ACTIVE": "1", "CODEX_NETWORK_ALLOW_LOCAL_BINDING": "1",
                 "KEEP": "1", "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                 MARKER_VAR: MARKER})
    for k in ("PWD", "SHLVL", "_", "LC_CTYPE"):  # what a shell or the runtime may add
        env.pop(k, None)
    assert env == want, {k: (env.get(k), want.get(k)) for k in set(env) | set(want)
                         if env.get(k) != want.get(k)}
    env2, _, _ = run_child(s, "e2", {"mode": "env"}, netproxy({"x.test": "allow"}, local=False))
    assert env2["ALL_PROXY"] == env2["HTTP_PROXY"] != http, env2
    assert env2["NO_PROXY"] == "" and env2["CODEX_NETWORK_ALLOW_LOCAL_BINDING"] == "0", env2
    s.close()


def test_allow_deny_and_not_listed(srv):
    need_names()
    s = srv.session()
    np = netproxy({HOST_A: "allow", HOST_B: "deny"})
    r, dec, _ = run_child(s, "a1", {"mode": "http", "url": url(HOST_A, "/allowed"),
                                    "headers": {"X-Keep": "1", "Connection": "X-Hop",
                                                "X-Hop": "gone", "Proxy-Authorization": "no"}},
                          np)
    assert r["status"] == 200 and r["body"] == "hello from /allowed", r
    got = received("/allowed")
    assert len(got) == 1, got
    h = got[0]["headers"]
    assert h["host"] == "%s:%d" % (HOST_A, PORT) and h["x-keep"] == "1", h
    for hop in ("proxy-connection", "proxy-authorization", "x-hop"):
        assert hop not in h, h
    assert len(dec) == 1, dec
    check_decision(dec[0], "a1", "allow", "baseline_policy", "allow", host=HOST_A)

    r, dec, _ = run_child(s, "a2", {"mode": "http", "url": url(HOST_B, "/denied")}, np)
    assert r["status"] == 403 and r["headers"]["content-type"] == "application/json", r
    assert r["headers"]["x-proxy-error"] == "blocked-by-denylist", r
    assert json.loads(r["body"]) == {
        "status": "blocked", "host": HOST_B, "reason": "denied", "decision": "deny",
        "source": "baseline_policy", "protocol": "http", "port": PORT,
        "message": "Domain denied by the sandbox policy."}, r
    assert list(json.loads(r["body"])) == ["status", "host", "reason", "decision", "source",
                                           "protocol", "port", "message"]
    check_decision(dec[0], "a2", "deny", "baseline_policy", "denied", host=HOST_B)

    r, dec, req = run_child(s, "a3", {"mode": "http", "url": url(HOST_B, "/unlisted")},
                            netproxy({HOST_A: "allow"}))
    assert r["status"] == 403 and r["headers"]["x-proxy-error"] == "blocked-by-allowlist", r
    assert json.loads(r["body"])["message"] == "Domain not in allowlist.", r
    assert not req, req  # no policyDecisionTimeoutMs: nothing is asked
    check_decision(dec[0], "a3", "deny", "baseline_policy", "not_allowed")
    assert not received("/denied") and not received("/unlisted")
    s.close()


def test_wildcard_patterns(srv):
    """`*.x` matches subdomains but not the apex, `**.x` both, `*` every host; deny wins.
    Judged on refusals, so no name needs to resolve."""
    s = srv.session()
    np = netproxy({"*.example.com": "deny", "**.apex.org": "deny", "Mixed.CASE.com.": "deny",
                   "region*.v2.argo.com": "deny", "*.ok.example.com": "allow"})
    cases = [("example.com", "not_allowed"), ("api.example.com", "denied"),
             ("a.ok.example.com", "denied"), ("apex.org", "denied"), ("x.apex.org", "denied"),
             ("mixed.case.com", "denied"), ("region1.v2.argo.com", "denied"),
             ("foo.region1.v2.argo.com", "not_allowed")]
    for i, (host, reason) in enumerate(cases):
        r, _, _ = run_child(s, "w%d" % i, {"mode": "http", "url": url(host, "/w")}, np)
        assert r["status"] == 403 and json.loads(r["body"])["reason"] == reason, (host, r)
    s.close()


def test_policy_request_answers(srv):
    """An unlisted host with policyDecisionTimeoutMs is put to the client as a JSON-RPC
    request with the server's own ids from 1; only allow passes; each request asks again."""
    need_names()
    s = srv.session()
    np = netproxy({HOST_A: "allow"}, timeout=5000)
    spec = {"mode": "http", "url": url(HOST_B, "/asked")}
    r, dec, req = run_child(s, "q1", spec, np, answer=allow)
    assert r["status"] == 200 and len(received("/asked")) == 1, r
    assert req[0] == {"id": 1, "method": "network/policyRequest", "params": {
        "processId": "q1", "request": {"protocol": "http", "host": HOST_B, "port": PORT}}}, req
    check_decision(dec[0], "q1", "allow", "decider", "not_allowed", override=True)

    r, dec, req = run_child(s, "q2", spec, np, answer=lambda m: {
        "id": m["id"], "result": {"decision": {"type": "deny", "reason": "nope"}}})
    assert req[0]["id"] == 2, req
    body = json.loads(r["body"])
    assert r["status"] == 403 and r["headers"]["x-proxy-error"] == "blocked-by-policy", r
    assert body["reason"] == "nope" and body["source"] == "decider", body
    assert body["message"] == "Request blocked by network policy.", body
    check_decision(dec[0], "q2", "deny", "decider", "nope")

    r, dec, _ = run_child(s, "q3", spec, np, answer=lambda m: {
        "id": m["id"], "result": {"decision": {"type": "ask", "reason": "hmm"}}})
    assert json.loads(r["body"])["decision"] == "ask", r
    check_decision(dec[0], "q3", "ask", "decider", "hmm")

    for pid, reply in (("q4", lambda m: {"id": m["id"], "error": {"code": -1, "message": "x"}}),
                       ("q5", lambda m: {"id": m["id"], "result": {"decision": "allow"}})):
        r, dec, _ = run_child(s, pid, spec, np, answer=reply)
        assert r["status"] == 403 and json.loads(r["body"])["reason"] == "not_allowed", r
        check_decision(dec[0], pid, "deny", "decider", "not_allowed")
    assert len(received("/asked")) == 1
    # a late answer (the request timed out) and a repeated one are ignored
    s.send_obj({"id": 1, "result": {"decision": {"type": "allow"}}})
    assert s.call("environment/status") == {"status": "ready"}
    s.close()


def test_review_domains(srv):
    """proxy.reviewDomains (capability networkProxyReviewDomains), settled on 0.169.0: a host
    under review is asked even when an allow entry lists it, and refused as not_allowed
    without policyDecisionTimeoutMs; deny still wins; patterns are checked like domains."""
    need_names()
    s = srv.session()
    spec = {"mode": "http", "url": url(HOST_A, "/reviewed")}
    r, dec, req = run_child(s, "v1", spec, netproxy({HOST_A: "allow"}, timeout=5000,
                                                    reviewDomains=[HOST_A]),
                            answer=lambda m: {"id": m["id"], "result": {
                                "decision": {"type": "deny", "reason": "rev"}}})
    assert len(req) == 1 and json.loads(r["body"])["reason"] == "rev", r
    r, dec, req = run_child(s, "v2", spec, netproxy({HOST_A: "allow"}, timeout=5000,
                                                    reviewDomains=[HOST_A]), answer=allow)
    assert r["status"] == 200 and len(received("/reviewed")) == 1, r
    check_decision(dec[0], "v2", "allow", "decider", "not_allowed", override=True)
    r, dec, req = run_child(s, "v3", spec, netproxy({HOST_A: "allow"}, reviewDomains=[HOST_A]))
    assert json.loads(r["body"])["reason"] == "not_allowed" and not req, r
    r, dec, req = run_child(s, "v4", spec, netproxy({HOST_A: "deny"}, timeout=5000,
                                                    reviewDomains=["*"]), answer=allow)
    assert json.loads(r["body"])["reason"] == "denied" and not req, r
    r, _, _ = run_child(s, "v5", spec, netproxy({HOST_A: "allow"}, timeout=5000,
                                                reviewDomains=["*." + HOST_A]))
    assert r["status"] == 200, r
    code, msg = s.error("process/start", {
        "processId": "v6", "argv": ["/bin/true"], "cwd": "file:///tmp", "env": {}, "tty": False,
        "networkProxy": netproxy({}, reviewDomains=["a b"])})
    assert (code, msg) == (-32602, "invalid network proxy config: unsupported domain pattern "
                                   "syntax: a b"), msg
    assert len(received("/reviewed")) == 2
    s.close()


def test_policy_request_timeout(srv):
    need_names()
    s = srv.session()
    t0 = time.monotonic()
    r, dec, req = run_child(s, "t1", {"mode": "http", "url": url(HOST_B, "/late")},
                            netproxy({HOST_A: "allow"}, timeout=300))
    assert len(req) == 1 and r["status"] == 403, r
    check_decision(dec[0], "t1", "deny", "decider", "not_allowed")
    assert time.monotonic() - t0 >= 0.3
    s.send_obj({"id": req[0]["id"], "result": {"decision": {"type": "allow"}}})
    assert s.call("environment/status") == {"status": "ready"}
    assert not received("/late")
    s.close()


def test_response_with_foreign_id_closes(srv):
    """Only responses to ids the server sent are accepted: a string id closes the
    connection (verified), and so does any response on a fresh connection."""
    need_names()
    s = srv.session()
    s.start("x1", [sys.executable, CLIENT, json.dumps({"mode": "http", "url": url(HOST_B, "/x")})],
            networkProxy=netproxy({HOST_A: "allow"}, timeout=20000), wait=False)
    m = wait_request(s, "x1")
    s.send_obj({"id": str(m["id"]), "result": {"decision": {"type": "allow"}}})
    assert s.wait_closed(), "a response with a string id must close the connection"
    s2 = srv.session()
    s2.send_obj({"id": 1, "result": {}})
    assert s2.wait_closed()


def test_pending_request_connection_drop(srv):
    """Settled on 0.169.0: a policy request pending when the connection drops is denied at
    once (the child gets its 403 long before the timeout)."""
    need_names()
    s = srv.session()
    out = os.path.join(srv.workdir, "drop.out")
    spec = json.dumps({"mode": "http", "url": url(HOST_B, "/dropped")})
    s.start("p1", ["/bin/sh", "-c", '"$0" "$1" "$2" > "$3"', sys.executable, CLIENT, spec, out],
            networkProxy=netproxy({HOST_A: "allow"}, timeout=60000), wait=False)
    wait_request(s, "p1")
    t0 = time.monotonic()
    s.close()

    def done():
        try:
            with open(out) as f:
                return f.read().strip()
        except OSError:
            return ""
    wait_until(done, timeout=DEFAULT_TIMEOUT, what="the child's answer")
    r = json.loads(done())
    assert r["status"] == 403 and json.loads(r["body"])["reason"] == "not_allowed", r
    assert time.monotonic() - t0 < 30
    assert not received("/dropped")


def test_limited_mode(srv):
    need_names()
    s = srv.session()
    np = netproxy({HOST_A: "allow"}, mode="limited")
    for i, method in enumerate(("GET", "HEAD", "OPTIONS")):
        r, dec, _ = run_child(s, "l%d" % i, {"mode": "http", "method": method,
                                             "url": url(HOST_A, "/lim-" + method)}, np)
        assert r["status"] == 200 and received("/lim-" + method), (method, r)
    r, dec, _ = run_child(s, "lp", {"mode": "http", "method": "POST", "body": "a=b",
                                    "url": url(HOST_A, "/lim-POST")}, np)
    assert r["status"] == 403 and r["headers"]["x-proxy-error"] == "blocked-by-method-policy", r
    assert json.loads(r["body"])["message"] == "Method not allowed in limited mode.", r
    assert [d["decision"] for d in dec] == ["allow", "deny"], dec
    check_decision(dec[1], "lp", "deny", "mode_guard", "method_not_allowed", method="POST",
                   scope="non_domain")
    r, dec, _ = run_child(s, "lc", {"mode": "connect", "host": HOST_A, "port": PORT,
                                    "path": "/lim-CONNECT"}, np)
    assert r["connect"] == 403 and r["body"] == "MITM required for limited HTTPS.", r
    check_decision(dec[1], "lc", "deny", "mode_guard", "mitm_required", method="CONNECT",
                   protocol="https_connect", scope="non_domain")
    assert not received("/lim-POST") and not received("/lim-CONNECT")
    s.close()


def test_connect_tunnel(srv):
    need_names()
    s = srv.session()
    np = netproxy({HOST_A: "allow", HOST_B: "deny"})
    r, dec, _ = run_child(s, "c1", {"mode": "connect", "host": HOST_A, "port": PORT,
                                    "path": "/tunnel"}, np)
    assert r["connect"] == 200 and r["body"] == "hello from /tunnel", r
    check_decision(dec[0], "c1", "allow", "baseline_policy", "allow", protocol="https_connect",
                   method="CONNECT")
    r, dec, _ = run_child(s, "c2", {"mode": "connect", "host": HOST_B, "port": PORT}, np)
    assert r["connect"] == 403 and r["body"] == "Domain denied by the sandbox policy.", r
    s.close()


def test_local_binding(srv):
    """allowLocalBinding false: a name resolving to loopback is refused even when listed or
    allowed by the client; an explicitly listed loopback literal passes."""
    need_names()
    s = srv.session()
    np = netproxy({HOST_A: "allow", "127.0.0.1": "allow"}, local=False, timeout=5000)
    r, dec, req = run_child(s, "b1", {"mode": "http", "url": url(HOST_A, "/local-name")}, np)
    assert r["status"] == 403 and not req, r
    body = json.loads(r["body"])
    assert body["reason"] == "not_allowed_local", body
    assert body["message"] == "Sandbox policy blocks local/private network addresses.", body
    check_decision(dec[0], "b1", "deny", "baseline_policy", "not_allowed_local")
    r, dec, req = run_child(s, "b2", {"mode": "http", "url": url(HOST_B, "/local-asked")}, np,
                            answer=allow)
    assert len(req) == 1 and json.loads(r["body"])["reason"] == "not_allowed_local", r
    assert len(dec) == 1, dec
    r, _, _ = run_child(s, "b3", {"mode": "http", "url": url("127.0.0.1", "/local-literal")}, np)
    assert r["status"] == 200 and received("/local-literal"), r
    r, _, req = run_child(s, "b4", {"mode": "http", "url": url("10.1.2.3", "/private")}, np,
                          answer=allow)
    assert json.loads(r["body"])["reason"] == "not_allowed_local" and not req, r
    assert not received("/local-name") and not received("/local-asked")
    s.close()


def test_socks5(srv):
    need_names()
    s = srv.session()
    np = netproxy({HOST_A: "allow", HOST_B: "deny"}, socks=True, timeout=5000)
    r, dec, _ = run_child(s, "s1", {"mode": "socks", "host": HOST_A, "port": PORT,
                                    "path": "/socks"}, np)
    assert r["rep"] == 0 and r["body"] == "hello from /socks", r
    check_decision(dec[0], "s1", "allow", "baseline_policy", "allow", protocol="socks5_tcp",
                   method=None)
    r, dec, _ = run_child(s, "s2", {"mode": "socks", "host": HOST_B, "port": PORT}, np)
    assert r["rep"] == 2, r  # connection not allowed by ruleset
    r, dec, req = run_child(s, "s3", {"mode": "socks", "host": "np-c.test", "port": PORT},
                            np, answer=lambda m: {"id": m["id"], "result": {
                                "decision": {"type": "deny", "reason": "no"}}})
    assert r["rep"] == 2 and req[0]["params"]["request"]["protocol"] == "socks5_tcp", (r, req)
    r, dec, _ = run_child(s, "s4", {"mode": "socks", "host": HOST_A, "port": PORT},
                          netproxy({HOST_A: "allow"}, socks=True, mode="limited"))
    assert r["rep"] == 2, r
    assert [(d["source"], d["reason"]) for d in dec] == [("mode_guard", "method_not_allowed")]
    s.close()


@ours_only
def test_socks5_udp(srv):
    """UDP ASSOCIATE: a datagram to an allowed host reaches the local UDP server and its
    reply comes back; a denied one goes nowhere; each destination is decided (and
    reported) once per association. (0.169.0 forwarded but sent no reply back here.)"""
    need_names()
    echo = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    echo.bind(("127.0.0.1", 0))
    got = []

    def serve():
        while True:
            d, a = echo.recvfrom(65536)
            got.append(d)
            echo.sendto(b"echo:" + d, a)
    threading.Thread(target=serve, daemon=True).start()
    port = echo.getsockname()[1]
    s = srv.session()
    np = netproxy({HOST_A: "allow", HOST_B: "deny"}, socks=True, enableSocks5Udp=True)
    r, dec, _ = run_child(s, "ud1", {"mode": "udp", "send": [
        [HOST_A, port, "one"], [HOST_A, port, "two"], [HOST_B, port, "no"]], "wait": 1}, np)
    assert r["replies"] == ["echo:one", "echo:two", None], r
    assert got == [b"one", b"two"], got
    assert [(d["protocol"], d["host"], d["decision"]) for d in dec] == [
        ("socks5_udp", HOST_A, "allow"), ("socks5_udp", HOST_B, "deny")], dec
    assert "method" not in dec[0], dec
    r, _, _ = run_child(s, "ud2", {"mode": "udp", "send": []},
                        netproxy({HOST_A: "allow"}, socks=True, enableSocks5Udp=False))
    assert r["rep"] == 7, r  # command not supported, as the reference answers
    s.close()


def test_decode_errors(srv):
    """Verified on 0.169.0, text for text."""
    s = srv.session()
    base = netproxy({"x.test": "allow"})["proxy"]
    cases = [
        ({"networkProxy": 1}, "invalid type: number, expected struct RemoteNetworkProxyLaunchConfig"),
        ({"networkProxy": {}}, "missing field `proxy`"),
        ({"networkProxy": {"proxy": {"enabled": True}}}, "missing field `enableSocks5`"),
        ({"networkProxy": {"proxy": dict(base, enabled=False)}},
         "invalid network proxy config: executor-local network proxy launch requires an "
         "enabled proxy"),
        ({"networkProxy": {"proxy": dict(base, mode="open")}},
         "unknown variant `open`, expected `limited` or `full`"),
        ({"networkProxy": {"proxy": dict(base, domains={"a": "maybe"})}},
         "unknown variant `maybe`, expected one of `none`, `allow`, `deny`"),
        ({"networkProxy": {"proxy": dict(base, domains=["a"])}},
         "invalid type: sequence, expected a map"),
        ({"networkProxy": {"proxy": base, "policyDecisionTimeoutMs": 0}},
         "network policy decision callback timeout must be nonzero"),
        ({"networkProxy": {"proxy": base, "policyDecisionTimeoutMs": -1}}, "invalid number"),
        ({"enforceManagedNetwork": None}, "invalid type: null, expected a boolean"),
        ({"networkProxy": {"proxy": dict(base, unixSockets=["/x"])}},
         "invalid type: sequence, expected struct NetworkUnixSocketPermissions"),
        ({"networkProxy": {"proxy": dict(base, domains={"*": "deny"})}},
         "invalid network proxy config: invalid value for network.denied_domains: * (allowed "
         "exact hosts or scoped wildcards like *.example.com or **.example.com)"),
        ({"networkProxy": {"proxy": dict(base, domains={"***.a.com": "allow"})}},
         "invalid network proxy config: unsupported repeated wildcard: ***.a.com"),
        ({"networkProxy": {"proxy": dict(base, credentialProviders={"v": {"bogus": 1}})}},
         "unknown field `bogus`, expected one of `env`, `patterns`, `url_prefixes`, "
         "`url_prefix_from_env`, `auth`, `header`, `prefix`"),
        ({"networkProxy": {"proxy": base, "environmentId": 5}},
         "invalid type: number, expected a string"),
        ({"managedNetwork": "x"},
         "invalid type: string \"x\", expected struct ManagedNetworkSandboxContext"),
    ]
    for i, (extra, want) in enumerate(cases):
        p = {"processId": "d%d" % i, "argv": ["/bin/true"], "cwd": "file:///tmp",
             "env": {}, "tty": False}
        p.update(extra)
        code, msg = s.error("process/start", p)
        assert (code, msg) == (-32602, want), (extra, code, msg)
    # accepted and without effect here: null proxy, managedNetwork, unixSockets, unknown keys
    for i, extra in enumerate([{"networkProxy": None}, {"managedNetwork": {"x": 1}},
                               {"enforceManagedNetwork": True},
                               {"networkProxy": {"proxy": dict(base, unixSockets={"/s": "allow"},
                                                               bogus=1)}}]):
        p = {"processId": "ok%d" % i, "argv": ["/bin/true"], "cwd": "file:///tmp", "env": {},
             "tty": False}
        p.update(extra)
        assert s.call("process/start", p) == {"processId": "ok%d" % i, "sandboxType": "none"}
    s.close()


def test_unix_socket_and_bad_requests(srv):
    need_names()
    s = srv.session()
    np = netproxy({HOST_A: "allow", HOST_B: "deny"}, unixSockets={"/tmp/x.sock": "allow"})
    r, dec, _ = run_child(s, "u1", {"mode": "http", "url": url(HOST_A, "/unix"),
                                    "headers": {"x-unix-socket": "/tmp/x.sock"}}, np)
    assert r["status"] == 501 and r["body"] == "unix sockets unsupported", r
    assert (dec[0]["source"], dec[0]["reason"], dec[0]["host"], dec[0]["port"]) == \
        ("proxy_state", "unix_socket_unsupported", "unix-socket", 0), dec
    r, _, _ = run_child(s, "u2", {"mode": "http", "url": url(HOST_A, "/spoof"),
                                  "headers": {"Host": HOST_B}}, np)
    assert r["status"] == 400 and r["body"] == "Host header does not match request target", r
    assert not received("/unix") and not received("/spoof")
    s.close()


def sandbox_ww(ws):
    def ent(kind, access):
        return {"path": {"type": "special", "value": {"kind": kind}}, "access": access}
    return {"permissions": {"type": "managed", "file_system": {
        "type": "restricted", "entries": [ent("root", "read"), ent("project_roots", "write")]},
        "network": "restricted"}, "cwd": "file://" + ws, "workspaceRoots": ["file://" + ws],
        "windowsSandboxLevel": "disabled"}


@ours_only
def test_sandboxed_child_reaches_only_the_proxy(srv):
    """enforceManagedNetwork: a sandboxed child with the network restricted reaches the
    policy proxy (in its own network namespace, through its init) and nothing else;
    without enforceManagedNetwork it gets the variables and no way out. (0.169.0 on this
    host cannot: its bubblewrap bridge fails with `execvp codex-linux-sandbox: No such
    file or directory`, exit 1.)"""
    need_names()
    s = srv.session()
    ws = tempfile.mkdtemp(prefix="np-sbx-")
    try:
        np = netproxy({HOST_A: "allow"}, socks=True)
        extra = {"sandbox": sandbox_ww(ws), "enforceManagedNetwork": True, "cwd": "file://" + ws}
        r, dec, _ = run_child(s, "sb1", {"mode": "http", "url": url(HOST_A, "/sbx-http")}, np,
                              extra=extra)
        assert r["status"] == 200 and r["body"] == "hello from /sbx-http", r
        assert len(received("/sbx-http")) == 1 and dec[0]["decision"] == "allow", dec
        r, _, _ = run_child(s, "sb2", {"mode": "socks", "host": HOST_A, "port": PORT,
                                       "path": "/sbx-socks"}, np, extra=extra)
        assert r["rep"] == 0 and r["body"] == "hello from /sbx-socks", r
        r, _, _ = run_child(s, "sb3", {"mode": "direct", "host": "127.0.0.1", "port": PORT},
                            np, extra=extra)
        assert r["direct"] != "ok", r  # its own loopback has nothing on that port
        # the variables alone, without enforceManagedNetwork: no way out at all
        no_bridge = dict(extra, enforceManagedNetwork=False)
        s.start("sb4", [sys.executable, CLIENT, json.dumps(
            {"mode": "http", "url": url(HOST_A, "/sbx-nobridge")})], networkProxy=np,
            **no_bridge)
        out = s.collect_until_closed("sb4")
        assert out["exit_code"] != 0 and not received("/sbx-nobridge"), out
    finally:
        s.close()
        shutil.rmtree(ws, ignore_errors=True)


def test_enforce_managed_network_without_a_proxy(srv):
    """enforceManagedNetwork and no networkProxy: the command does not run; exit 101 and
    sandboxDenied, as the reference's sandbox wrapper fails."""
    s = srv.session()
    ws = tempfile.mkdtemp(prefix="np-sbx-")
    try:
        extra = {"sandbox": sandbox_ww(ws), "enforceManagedNetwork": True, "cwd": "file://" + ws}
        s.start("sb5", ["/bin/sh", "-c", "echo ran"], **extra)
        out = s.collect_until_closed("sb5")
        assert out["exit_code"] == 101 and b"ran" not in out["stdout"], out
        assert b"managed proxy mode requires proxy environment variables" in out["stderr"], out
        rd = s.call("process/read", {"processId": "sb5"})
        assert rd["sandboxDenied"] is True, rd
    finally:
        s.close()
        shutil.rmtree(ws, ignore_errors=True)


def test_proxy_ends_with_the_process(srv):
    s = srv.session()
    env, _, _ = run_child(s, "z1", {"mode": "env"}, netproxy({"x.test": "allow"}))
    port = int(env["HTTP_PROXY"].rsplit(":", 1)[1])

    def refused():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return False
        except OSError:
            return True
    wait_until(refused, timeout=DEFAULT_TIMEOUT, what="the proxy's listener to close")
    s.close()


VENDOR_REAL = "vendor_" + "qwertyuiopasdfghjklzxcvb"
GH_REAL = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def masking_proxy(**kw):
    providers = {"vendor": {"env": ["VENDOR_TOKEN"], "patterns": ["^vendor_[a-z]{24}$"],
                            "url_prefixes": ["https://np-a.test:%d/v1" % HTTPS_PORT]},
                 "broken": {"env": ["BROKEN_TOKEN"], "patterns": []}}
    return netproxy({"np-a.test": "allow", "api.github.com": "allow"}, credentialMasking=True,
                    credentialProviders=providers, **kw)


def masked_env():
    return {"VENDOR_TOKEN": VENDOR_REAL, "GH_TOKEN": GH_REAL, "NOT_A_SECRET": VENDOR_REAL,
            "BROKEN_TOKEN": "kept-as-is"}


@ours_only
def test_credential_masking_child_env(srv):
    """The child sees dummies of the real values' shape and the CA bundle variables; the
    bundle holds the server's trust store and the interception CA. (0.169.0 never managed
    to mask on this host, §8.3, so this is ours only.)"""
    if not HAVE_CERTS:
        raise TestSkip("no openssl command to make the test certificates")
    s = srv.session()
    env, _, _ = run_child(s, "k1", {"mode": "env"}, masking_proxy(), env=masked_env())
    v, g = env["VENDOR_TOKEN"], env["GH_TOKEN"]
    assert v != VENDOR_REAL and re.fullmatch(r"vendor_[a-z]{24}", v), v
    assert g != GH_REAL and g.startswith("ghp_") and len(g) == len(GH_REAL), g
    assert re.fullmatch(r"ghp_[A-Za-z0-9]+", g), g
    assert env["NOT_A_SECRET"] == VENDOR_REAL and env["BROKEN_TOKEN"] == "kept-as-is", env
    for real in (VENDOR_REAL, GH_REAL[4:]):
        assert not any(real in val for k, val in env.items() if k != "NOT_A_SECRET"), env
    bundle = env["SSL_CERT_FILE"]
    for var in ("CODEX_CA_CERTIFICATE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE",
                "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "PIP_CERT", "CARGO_HTTP_CAINFO",
                "NPM_CONFIG_CAFILE", "npm_config_cafile", "BUNDLE_SSL_CA_CERT"):
        assert env[var] == bundle, (var, env.get(var))
    assert bundle.startswith(os.environ["CODEX_HOME"] + "/proxy/"), bundle
    with open(bundle) as f:
        text = f.read()
    with open(os.path.join(CERTS, "ca.pem")) as f:
        assert f.read().strip() in text  # the server's trust store comes first
    assert text.count("BEGIN CERTIFICATE") == 2, text
    key = os.path.join(os.environ["CODEX_HOME"], "proxy", "exec-server-mitm-ca.key")
    assert os.stat(key).st_mode & 0o077 == 0, oct(os.stat(key).st_mode)
    caps = s.call("environment/info", {})["capabilities"]
    assert caps["credentialMasking"] is True and caps["credentialMaskingCustomProviders"] is True
    s.close()


@ours_only
def test_credential_masking_swaps_in_the_real_value(srv):
    """The local HTTPS server behind the interception receives the real token, and only for
    the provider's URL prefixes; everywhere else it receives the dummy the child sent."""
    if not HAVE_CERTS:
        raise TestSkip("no openssl command to make the test certificates")
    s = srv.session()
    np = masking_proxy()

    def https(pid, host, path, **kw):
        spec = dict({"mode": "https", "host": host, "port": HTTPS_PORT, "path": path}, **kw)
        r, _, _ = run_child(s, pid, spec, np, env=masked_env())
        assert r.get("status") == 200, r
        got = received(path)
        assert len(got) == 1, got
        return r["sent"], got[0]["headers"].get("authorization")

    sent, got = https("h1", "np-a.test", "/v1/data", auth_env="VENDOR_TOKEN")
    assert sent != "Bearer " + VENDOR_REAL and got == "Bearer " + VENDOR_REAL, (sent, got)
    sent, got = https("h2", "np-a.test", "/v1x/outside", auth_env="VENDOR_TOKEN")
    assert got == sent != "Bearer " + VENDOR_REAL, (sent, got)
    sent, got = https("h3", "api.github.com", "/user", auth_env="GH_TOKEN", auth_scheme="token")
    assert got == "token " + GH_REAL and sent != got, (sent, got)
    sent, got = https("h4", "api.github.com", "/repo.git/info/refs", basic_env="GH_TOKEN")
    import base64
    assert base64.b64decode(got.split(" ", 1)[1]) == ("x-access-token:" + GH_REAL).encode(), got
    sent, got = https("h5", "api.github.com", "/vendor-elsewhere", auth_env="VENDOR_TOKEN")
    assert got == sent and VENDOR_REAL not in got, (sent, got)
    # a host no provider names is tunnelled untouched: its own certificate reaches the child
    r, _, _ = run_child(s, "h6", {"mode": "https", "host": "np-a.test", "port": PORT,
                                  "path": "/plain"}, netproxy({"np-a.test": "allow"}))
    assert "tls_error" in r, r  # the plain HTTP server cannot speak TLS: nothing intercepted
    s.close()


@ours_only
def test_limited_mode_with_interception(srv):
    """With masking on, limited mode can see HTTPS methods: GET passes, POST is refused."""
    if not HAVE_CERTS:
        raise TestSkip("no openssl command to make the test certificates")
    s = srv.session()
    np = masking_proxy(mode="limited")
    r, _, _ = run_child(s, "i1", {"mode": "https", "host": "np-a.test", "port": HTTPS_PORT,
                                  "path": "/v1/get"}, np, env=masked_env())
    assert r["status"] == 200 and received("/v1/get"), r
    r, dec, _ = run_child(s, "i2", {"mode": "https", "host": "np-a.test", "port": HTTPS_PORT,
                                    "path": "/v1/post", "method": "POST", "body": "x"}, np,
                          env=masked_env())
    assert r["status"] == 403 and json.loads(r["body"])["reason"] == "method_not_allowed", r
    assert dec[-1]["source"] == "mode_guard" and dec[-1]["method"] == "POST", dec
    assert not received("/v1/post")
    s.close()


class FakeUpstream:
    """The server's own upstream proxy (allowUpstreamProxy): records the first line of every
    request and answers by itself, so nothing leaves the machine."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.lines = []
        threading.Thread(target=self.serve, daemon=True).start()

    @staticmethod
    def head(conn):
        data = b""
        while b"\r\n\r\n" not in data:
            c = conn.recv(4096)
            if not c:
                break
            data += c
        return data.split(b"\r\n", 1)[0].decode()

    def serve(self):
        while True:
            conn, _ = self.sock.accept()
            try:
                line = self.head(conn)
                self.lines.append(line)
                body = b"via-upstream"
                if line.startswith("CONNECT "):
                    conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    self.lines.append("inner " + self.head(conn))
                    body = b"via-upstream-tunnel"
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                             % len(body) + body)
            finally:
                conn.close()


def server_with_upstream(up, extra_args=()):
    saved = {k: os.environ.get(k) for k in ("HTTP_PROXY", "HTTPS_PROXY")}
    os.environ["HTTP_PROXY"] = os.environ["HTTPS_PROXY"] = "http://127.0.0.1:%d" % up.port
    try:
        return Server(extra_args=extra_args)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@ours_only
@needs_own_server
def test_upstream_proxy(_):
    """allowUpstreamProxy: public destinations go through the server's HTTP(S)_PROXY (HTTP in
    absolute form, CONNECT and SOCKS5 as CONNECT); loopback stays local; private addresses
    go upstream only with --proxy-private-ips-via-upstream."""
    up = FakeUpstream()
    np = netproxy({"public.test": "allow", "private.test": "allow", "np-a.test": "allow"},
                  socks=True, allowUpstreamProxy=True)
    with server_with_upstream(up) as srv:
        s = srv.session()
        r, _, _ = run_child(s, "up1", {"mode": "http", "url": "http://public.test/pub"}, np)
        assert r["body"] == "via-upstream", r
        assert up.lines[-1] == "GET http://public.test:80/pub HTTP/1.1", up.lines
        r, _, _ = run_child(s, "up2", {"mode": "connect", "host": "public.test", "port": 443,
                                       "path": "/tun"}, np)
        assert r["connect"] == 200 and r["body"] == "via-upstream-tunnel", r
        assert up.lines[-2:] == ["CONNECT public.test:443 HTTP/1.1", "inner GET /tun HTTP/1.1"]
        r, _, _ = run_child(s, "up3", {"mode": "socks", "host": "public.test", "port": 443,
                                       "path": "/sock"}, np)
        assert r["rep"] == 0 and r["body"] == "via-upstream-tunnel", r
        n = len(up.lines)
        r, _, _ = run_child(s, "up4", {"mode": "http", "url": url("np-a.test", "/loop")}, np)
        assert r["status"] == 200 and received("/loop") and len(up.lines) == n, up.lines
        s.close()
    with server_with_upstream(up, ["--proxy-private-ips-via-upstream"]) as srv:
        s = srv.session()
        r, _, _ = run_child(s, "up5", {"mode": "http", "url": "http://private.test/priv"}, np)
        assert r["body"] == "via-upstream", r
        assert up.lines[-1] == "GET http://private.test:80/priv HTTP/1.1", up.lines
        s.close()


@ours_only
def test_decision_metrics(srv):
    need_names()
    s = srv.session()
    run_child(s, "m1", {"mode": "http", "url": url(HOST_B, "/metric")},
              netproxy({HOST_B: "deny"}, mode="limited"))
    status, _, body = http_raw(srv.host, srv.port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    text = body.decode()
    line = 'exec_server_network_policy_decisions_total{decision="deny",mode="limited",' \
           'source="baseline_policy"}'
    assert any(l.startswith(line) and int(l.split()[-1]) >= 1 for l in text.splitlines()), text
    s.close()


if __name__ == "__main__":
    run_tests(globals(), per_test_timeout=120)
